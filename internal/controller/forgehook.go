package controller

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/forges"
)

// HookPrefix is where the controller's HTTP listener takes the forges'
// webhook deliveries: POST /forges/<forge>/webhook.
const HookPrefix = "/forges/"

// A webhook delivery is a signal to read a pull request now, never the
// truth about it: what the controller records comes from the forge's API.
// Before it is even that it must be signed with the forge's secret (GitHub
// and Gitea: an HMAC of the body; GitLab: its token), name a repository
// whose pull request the controller follows, and not be a delivery seen
// before. Everything else is refused, with a status that says why and
// nothing more.
func (r *forgeRunner) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status, msg := r.hook(req)
	if status >= 400 {
		r.log.Warn("webhook delivery refused", "path", req.URL.Path, "status", status, "why", msg, "from", req.RemoteAddr)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// hook judges one delivery: the status to answer and why.
func (r *forgeRunner) hook(req *http.Request) (int, string) {
	name, ok := strings.CutSuffix(strings.TrimPrefix(req.URL.Path, HookPrefix), "/webhook")
	fc, known := r.cfg.Forges[name]
	switch {
	case !ok || !known:
		return http.StatusNotFound, "no such forge"
	case req.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, "POST only"
	case fc.WebhookSecretEnv == "" || os.Getenv(fc.WebhookSecretEnv) == "":
		return http.StatusNotFound, "webhooks are off for this forge (no webhook_secret_env)"
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, forge.MaxWebhookBody+1))
	switch {
	case err != nil:
		return http.StatusBadRequest, "cannot read the body"
	case len(body) > forge.MaxWebhookBody:
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", forge.MaxWebhookBody)
	}
	h := forges.Hook(fc.Kind())
	if err := h.Verify(req.Header, body, []byte(os.Getenv(fc.WebhookSecretEnv))); err != nil {
		if errors.Is(err, forge.ErrUnsigned) {
			return http.StatusUnauthorized, "unsigned"
		}
		return http.StatusUnauthorized, "bad signature"
	}
	d, err := h.Decode(req.Header, body)
	if err != nil {
		return http.StatusBadRequest, "cannot read the delivery"
	}
	if !r.replays.first(name+"/"+d.ID, r.now()) {
		return http.StatusConflict, "delivery seen before"
	}
	if d.Ignored {
		return http.StatusAccepted, "nothing to follow in " + d.Event
	}
	flows, repoKnown := r.followed(name, d)
	switch {
	case !repoKnown:
		return http.StatusNotFound, "no pull request of this repository is followed"
	case len(flows) == 0:
		return http.StatusAccepted, "no followed pull request is concerned"
	}
	if r.leading != nil && !r.leading() && r.relay != nil {
		// A standby follows nothing: the leader reads the pull request.
		if err := r.relay(req.Context(), flows); err != nil {
			r.replays.forget(name + "/" + d.ID) // so that a redelivery is taken
			r.log.Warn("webhook delivery not relayed to the leader", "err", err)
			return http.StatusServiceUnavailable, "no controller leads now: deliver it again"
		}
		return http.StatusAccepted, "the leader reads the pull request"
	}
	for _, id := range flows {
		r.wakeFlow(id)
	}
	return http.StatusAccepted, "reading the pull request"
}

// followed returns the flows whose open pull request a delivery concerns,
// and whether any followed pull request is of its repository.
func (r *forgeRunner) followed(forgeName string, d *forge.Delivery) (flows []string, repoKnown bool) {
	r.read(func(st *projection.State) {
		for id, f := range st.Flows {
			pr := f.PR
			if pr == nil || pr.Number == 0 || pr.Forge != forgeName || !strings.EqualFold(pr.Repo, d.Repo) {
				continue
			}
			repoKnown = true
			if pr.State == string(forge.Open) && (d.Number == pr.Number || d.Number == 0 && (d.SHA != "" && d.SHA == pr.HeadSHA || d.Head != "" && d.Head == pr.Head)) {
				flows = append(flows, id)
			}
		}
	})
	return flows, repoKnown
}

// How long, and how many, delivery ids are remembered to refuse replays.
const (
	replayWindow = 72 * time.Hour // GitHub redelivers for 3 days
	maxReplays   = 100_000
)

// replays remembers the delivery ids seen lately. A replay older than the
// window, or one arriving after a controller restart, gets past it; it
// only makes the controller read the pull request once more, and the
// feedback it then finds is keyed by the forge's own ids, so it starts
// nothing twice.
type replays struct {
	mu     sync.Mutex
	window time.Duration
	max    int
	seen   map[string]time.Time
	order  []string // oldest first
}

func newReplays(window time.Duration, max int) *replays {
	return &replays{window: window, max: max, seen: map[string]time.Time{}}
}

// forget drops id, a delivery that could not be acted on.
func (p *replays) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.seen, id)
	p.order = slices.DeleteFunc(p.order, func(o string) bool { return o == id })
}

// first records id and reports whether it was not seen within the window.
func (p *replays) first(id string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.order) > 0 && (len(p.order) >= p.max || now.Sub(p.seen[p.order[0]]) > p.window) {
		delete(p.seen, p.order[0])
		p.order = p.order[1:]
	}
	if _, ok := p.seen[id]; ok {
		return false
	}
	p.seen[id] = now
	p.order = append(p.order, id)
	return true
}
