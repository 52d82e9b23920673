// Package gqlschema holds the Runtime Provisioner's GraphQL schema (schema.graphql), its Go
// models (models_gen.go) and the gqlgen executable schema (generated.go). Resolvers live in
// internal/provisioner/api.
package gqlschema

//go:generate go run github.com/99designs/gqlgen generate
