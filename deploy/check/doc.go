// Package check holds the tests that check legate's install artifacts
// against the real schemas: the output of internal/manifest for every kind
// and both Helm charts of deploy/helm, decoded strictly into k8s.io/api
// types, the AWS SDK's ECS inputs, and small strict parsers of compose
// files, docker run commands and systemd units. It is a module of its own
// so that these heavy dependencies stay out of legate's go.mod and binary.
package check
