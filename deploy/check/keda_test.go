package check

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KEDA's objects, as far as legate manifest kubernetes --autoscale-with
// keda writes them: the fields of KEDA's ScaledObject and
// TriggerAuthentication (keda.sh/v1alpha1) that the manifest uses, with
// KEDA's JSON names. KEDA's own Go module is not a dependency of this
// check, and the local API server has no KEDA CRDs: a strict decode into
// these catches a misplaced or misspelled field, not a value KEDA would
// refuse.
type kedaScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

type kedaTriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}
