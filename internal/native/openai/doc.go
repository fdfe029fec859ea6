// Package openai is the native runtime's client for OpenAI's two APIs,
// through the official SDK (github.com/openai/openai-go), streaming: the
// Responses API (provider openai-responses) and Chat Completions (provider
// openai-chat), which vLLM, Ollama, OpenRouter and LiteLLM serve too. Each
// turns the loop's provider-agnostic conversation into its API's
// parameters, the stream back into a model.Response, and every failure
// into a model.Error.
//
// It reads nothing from the environment (no OPENAI_* variable applies:
// services are built from explicit options only) and retries nothing: the
// SDK's retries are off, so the loop alone decides. It must not know about
// the loop, tools or Drover's events.
package openai
