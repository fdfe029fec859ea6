// Package anthropic is the native runtime's client for Anthropic's Messages
// API, through the official SDK (github.com/anthropics/anthropic-sdk-go),
// streaming. It turns the loop's provider-agnostic conversation into
// Messages parameters and the stream's events back into a model.Response,
// and classifies every failure as a model.Error.
//
// It reads nothing from the environment and retries nothing: the SDK's own
// retries are off, so the loop alone decides what a failure means. It must
// not know about the loop, tools or Drover's events.
package anthropic
