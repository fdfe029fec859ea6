// Package nativetest is test support for the native runtime: a scripted
// MockModelClient (which also replays a recorded attempt), a FakeClock,
// and three HTTP servers that speak the providers' documented streaming
// wire formats — Anthropic Messages, OpenAI Responses and OpenAI Chat
// Completions — so that the real SDK clients can be tested over real HTTP
// without the internet. Servers answer from a provider-neutral script
// (Reply) and record what they were sent.
//
// Production code must not import it: it imports "testing".
package nativetest
