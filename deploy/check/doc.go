// Package check holds the tests that check legate's install artifacts
// against the real schemas: the output of internal/manifest for every kind
// and both Helm charts of deploy/helm, decoded strictly into k8s.io/api
// types, the AWS SDK's ECS inputs, and small strict parsers of compose
// files, docker run commands and systemd units. It also runs every kind's
// artifact for real: the delegate environment read back from it starts
// legate's image (podman) against a manager on the host. It is a module of
// its own so that these heavy dependencies stay out of legate's go.mod and
// binary.
package check
