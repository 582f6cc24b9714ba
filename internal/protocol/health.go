package protocol

// Health and metrics endpoints, served by the manager on its API address
// and by a delegate on DELEGATE_HTTP_PORT. PathHealth is in protocol.go.
const (
	// PathReady answers 200 when the process is ready for work, 503 with
	// the reason otherwise.
	PathReady = "/readyz"
	// PathMetrics serves Prometheus metrics in the text format.
	PathMetrics = "/metrics"
)

// HealthStatus is the body of the health and readiness answers.
type HealthStatus struct {
	Status string `json:"status"`           // "ok", "ready" or "not ready"
	Reason string `json:"reason,omitempty"` // why not ready
}
