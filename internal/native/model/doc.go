// Package model is the provider-agnostic contract between Drover's native
// agent loop (package native) and a model API: a Request (the conversation
// so far and the tools on offer), the Response one streamed turn yields
// (text, tool calls, usage), and an Error that says what kind of failure a
// provider's answer was — rate limit, refused credentials, transient — so
// that the loop, not the SDK, decides what happens next.
//
// It owns the ModelClient interface the provider packages (anthropic,
// openai) implement and the reading of rate-limit headers they share. It
// must not know about any SDK, the loop, tools or Drover's events: it is the
// leaf every other native package imports.
package model
