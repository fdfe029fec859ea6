package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/objstore"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// An API body larger than one NATS message allows (a flow of thousands of
// tasks, the status of one) travels through the transfers object store:
// the message carries its name in objstore.TransferHeader and no body.
// Both directions work this way, so no request or reply has a size limit
// but objstore.MaxTransferSize.

// transferMargin leaves room in a message for the headers.
const transferMargin = 16 << 10

// inline reports whether a body of n bytes fits in a message on nc.
func inline(nc *nats.Conn, n int) bool {
	return int64(n) <= nc.MaxPayload()-transferMargin
}

// requestBody returns a request's body, from the transfers store if it
// came that way, or why it is refused: larger than limit, or a transfer
// for a request that always fits in a message.
func (c *Controller) requestBody(ctx context.Context, r micro.Request, limit int) ([]byte, error) {
	name := r.Headers().Get(objstore.TransferHeader)
	if name == "" {
		if len(r.Data()) > limit {
			return nil, badRequest("request of %d bytes; the limit is %d", len(r.Data()), limit)
		}
		return r.Data(), nil
	}
	if len(r.Data()) > 0 {
		return nil, badRequest("a request sent by transfer has no body of its own")
	}
	if inline(c.js.Conn(), limit) {
		// Only a request that may be larger than a message comes this way.
		return nil, badRequest("this request is at most %d bytes and is not sent by transfer", limit)
	}
	body, err := objstore.GetTransfer(ctx, c.js, name)
	if err != nil {
		return nil, badRequest("request body: %v", err)
	}
	if len(body) > limit {
		return nil, badRequest("request of %d bytes; the limit is %d", len(body), limit)
	}
	return body, nil
}

// refuse answers a request that failed its checks: a bad request, in the
// checks' words, or an internal error.
func (c *Controller) refuse(r micro.Request, what string, err error) {
	var re *requestError
	if errors.As(err, &re) {
		// The body holds the whole message: a header cannot hold the
		// line breaks between a flow's problems.
		var opts []micro.RespondOpt
		if b, err := json.Marshal(re.problems); err == nil && len(re.problems) > 0 {
			opts = append(opts, micro.WithHeaders(micro.Headers{ProblemsHeader: {string(b)}}))
		}
		_ = r.Error(CodeBadRequest, re.msg, []byte(re.msg), opts...)
		return
	}
	_ = r.Error(CodeInternal, what+" request: "+err.Error(), nil)
}

// refusedHere is a request the Client refuses before sending it, with the
// code and words the controller would answer it with.
func refusedHere(err error) error {
	return &APIError{Code: CodeBadRequest, Message: err.Error(), Problems: flowRefused(err).problems}
}

// respondJSON answers with v, through the transfers store when it is too
// large for a message.
func (c *Controller) respondJSON(ctx context.Context, r micro.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		_ = r.Error(CodeInternal, "encode reply: "+err.Error(), nil)
		return
	}
	if inline(c.js.Conn(), len(body)) {
		if err := r.Respond(body); err != nil {
			c.log.Warn("api reply", "subject", r.Subject(), "err", err)
		}
		return
	}
	name, err := objstore.PutTransfer(ctx, c.js, body)
	if err != nil {
		_ = r.Error(CodeInternal, fmt.Sprintf("reply of %d bytes: %v", len(body), err), nil)
		return
	}
	if err := r.Respond(nil, micro.WithHeaders(micro.Headers{objstore.TransferHeader: []string{name}})); err != nil {
		c.log.Warn("api reply", "subject", r.Subject(), "err", err)
	}
}

// message builds a request to subject, through the transfers store when
// the body is too large for a message.
func (cl *Client) message(ctx context.Context, subject string, body []byte) (*nats.Msg, error) {
	msg := nats.NewMsg(subject)
	if inline(cl.NC, len(body)) {
		msg.Data = body
		return msg, nil
	}
	js, err := jetstream.New(cl.NC)
	if err != nil {
		return nil, err
	}
	name, err := objstore.PutTransfer(ctx, js, body)
	if err != nil {
		return nil, fmt.Errorf("controller: request of %d bytes: %w", len(body), err)
	}
	msg.Header.Set(objstore.TransferHeader, name)
	return msg, nil
}

// replyBody returns a reply's body, from the transfers store if it came
// that way.
func (cl *Client) replyBody(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	name := msg.Header.Get(objstore.TransferHeader)
	if name == "" {
		return msg.Data, nil
	}
	js, err := jetstream.New(cl.NC)
	if err != nil {
		return nil, err
	}
	return objstore.GetTransfer(ctx, js, name)
}
