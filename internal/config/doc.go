// Package config loads Drover's configuration once, with one precedence:
// command-line flags over DROVER_* environment variables over the YAML
// config file over defaults. Viper lives here and nowhere else; the rest of
// Drover receives the plain, validated Config struct.
package config
