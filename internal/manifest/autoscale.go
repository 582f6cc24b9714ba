package manifest

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// AutoscalerKeyKey is the key, in the Secret NAME-CODE-autoscaler that
// the operator creates, of the manager API key the autoscaler (or KEDA's
// metrics-api trigger) sends as a bearer token.
const AutoscalerKeyKey = "LEGATE_API_KEY"

// maxAutoscale bounds MAX of --autoscale (the autoscaler's bound).
const maxAutoscale = 200

// autoscaleBounds parses MIN:MAX.
func autoscaleBounds(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi < 1 || lo > hi || hi > maxAutoscale {
		return 0, 0, fmt.Errorf("autoscale %q: want MIN:MAX replicas, such as 1:10 (0 <= MIN <= MAX, 1 <= MAX <= %d)", s, maxAutoscale)
	}
	return lo, hi, nil
}

// normalizeAutoscale checks --autoscale and --autoscale-with.
func normalizeAutoscale(p *Params) error {
	if p.Autoscale == "" {
		if p.AutoscaleWith != "" {
			return fmt.Errorf("autoscale-with %s needs autoscale MIN:MAX", p.AutoscaleWith)
		}
		return nil
	}
	if p.Kind != KindKubernetes {
		return fmt.Errorf("autoscale applies to a kubernetes manifest, not %s", p.Kind)
	}
	if _, _, err := autoscaleBounds(p.Autoscale); err != nil {
		return err
	}
	switch p.AutoscaleWith {
	case "":
		p.AutoscaleWith = protocol.AutoscaleLegate
	case protocol.AutoscaleLegate, protocol.AutoscaleKEDA, protocol.AutoscaleHPA:
	default:
		return fmt.Errorf("autoscale-with %q: use legate (legate autoscaler, the default), keda (a KEDA ScaledObject) or hpa (a HorizontalPodAutoscaler)", p.AutoscaleWith)
	}
	return nil
}

// tasksPerReplica is the delegate's task capacity as the manifest sets it
// (its size, else DELEGATE_TASK_CAPACITY in --env), else 1.
func tasksPerReplica(p Params) int {
	if sz, ok := SizeOf(p.Size); ok {
		return sz.Capacity
	}
	for _, e := range p.Env {
		if n, err := strconv.Atoi(e.Value); e.Name == capacityEnv && err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// queueURL is the manager's queue signal of the StatefulSet's delegates.
func queueURL(p Params, hi int) string {
	sels := protocol.PoolSelectors(p.Name, k8sFullName(p), p.Tags, hi)
	return strings.TrimSuffix(p.ManagerURL, "/") + protocol.PathQueue + "?" + url.Values{"selectors": {strings.Join(sels, ",")}}.Encode()
}

// autoscaleDocs are the objects that size the StatefulSet: legate
// autoscaler's Deployment and its RBAC (get and patch that StatefulSet's
// scale, nothing else), or a KEDA ScaledObject, or an HPA.
func autoscaleDocs(p Params, meta func(string, bool) mapping) (comment string, docs []mapping) {
	lo, hi, _ := autoscaleBounds(p.Autoscale) // normalize checked it
	full := k8sFullName(p)
	name := full + "-autoscaler"
	per := tasksPerReplica(p)
	keyRef := mapping{{"secretKeyRef", mapping{{"name", name}, {"key", AutoscalerKeyKey}}}}
	target := mapping{{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"}, {"name", full}}
	create := fmt.Sprintf("Before applying, create the Secret of its API key (a service account's, with the viewer role at the account:\n"+
		"task:view and delegate:view):\n"+
		"  legate user create %[1]s --service-account\n"+
		"  legate role bind viewer --service-account %[1]s\n"+
		"  kubectl create namespace %[2]s --dry-run=client -o yaml | kubectl apply -f -\n"+
		"  kubectl create secret generic %[1]s -n %[2]s --from-literal=%[3]s=\"$(legate apikey create %[1]s --owner %[1]s | tail -n1)\"\n",
		name, p.Namespace, AutoscalerKeyKey)
	switch p.AutoscaleWith {
	case protocol.AutoscaleKEDA:
		return "KEDA (2.13 or later: bearer authentication of metrics-api) sizes " + full + " on its queue signal.\n" + create +
				"KEDA's scale-in does not wait for a replica to finish its tasks: the delegate's own drain (terminationGracePeriodSeconds) is all.",
			[]mapping{
				{{"apiVersion", "keda.sh/v1alpha1"}, {"kind", "TriggerAuthentication"}, {"metadata", meta(name, true)},
					{"spec", mapping{{"secretTargetRef", seq{mapping{{"parameter", "token"}, {"name", name}, {"key", AutoscalerKeyKey}}}}}}},
				{{"apiVersion", "keda.sh/v1alpha1"}, {"kind", "ScaledObject"}, {"metadata", meta(name, true)},
					{"spec", mapping{
						{"scaleTargetRef", target},
						{"minReplicaCount", lo}, {"maxReplicaCount", hi},
						{"triggers", seq{mapping{
							{"type", "metrics-api"},
							{"metadata", mapping{{"url", queueURL(p, hi)}, {"valueLocation", "eligible"}, {"targetValue", strconv.Itoa(per)}, {"authMode", "bearer"}}},
							{"authenticationRef", mapping{{"name", name}}},
						}}},
					}}},
			}
	case protocol.AutoscaleHPA:
		return "An HPA sizes " + full + " on the external metric " + hpaMetric(full) + ", which an adapter serves from the\n" +
				"manager's /metrics; with the Prometheus adapter, an external rule such as:\n" +
				"  - seriesQuery: 'legate_queue_tasks'\n" +
				"    metricsQuery: 'sum(legate_queue_tasks{selectors=\"" + strings.Join(protocol.NormalizeSelectors(p.Tags), ",") + "\"})'\n" +
				"    name: {as: \"" + hpaMetric(full) + "\"}\n" +
				"The HPA's scale-in does not wait for a replica to finish its tasks: the delegate's own drain is all.",
			[]mapping{{{"apiVersion", "autoscaling/v2"}, {"kind", "HorizontalPodAutoscaler"}, {"metadata", meta(name, true)},
				{"spec", mapping{
					{"scaleTargetRef", target},
					{"minReplicas", max(lo, 1)}, {"maxReplicas", hi},
					{"metrics", seq{mapping{{"type", "External"}, {"external", mapping{
						{"metric", mapping{{"name", hpaMetric(full)}}},
						{"target", mapping{{"type", "AverageValue"}, {"averageValue", strconv.Itoa(per)}}},
					}}}}},
				}}}}
	}
	args := seq{"autoscaler", "--namespace", p.Namespace, "--statefulset", full, "--delegate", p.Name,
		"--bounds", p.Autoscale, "--tasks-per-replica", strconv.Itoa(per)}
	if len(p.Tags) > 0 {
		args = append(args, "--selectors", strings.Join(protocol.NormalizeSelectors(p.Tags), ","))
	}
	labels := mapping{{LabelPrefix + "app", "legate-autoscaler"}, {LabelPrefix + "account", AccountCode(p.AccountID)}, {LabelPrefix + "name", p.Name}}
	return "legate autoscaler sizes " + full + " on its queue signal (docs/elastic.md).\n" + create, []mapping{
		{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", meta(name, true)}, {"automountServiceAccountToken", true}},
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta(name, true)},
			{"rules", seq{mapping{{"apiGroups", seq{"apps"}}, {"resources", seq{"statefulsets/scale"}}, {"resourceNames", seq{full}},
				{"verbs", seq{"get", "patch"}}}}}},
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"}, {"metadata", meta(name, true)},
			{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
			{"subjects", seq{mapping{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", p.Namespace}}}}},
		{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", meta(name, true)},
			{"spec", mapping{
				{"replicas", 1},
				// Never two autoscalers of one StatefulSet at once.
				{"strategy", mapping{{"type", "Recreate"}}},
				{"selector", mapping{{"matchLabels", labels}}},
				{"template", mapping{
					{"metadata", mapping{{"labels", labels}}},
					{"spec", mapping{
						{"serviceAccountName", name},
						{"containers", seq{mapping{
							{"name", "autoscaler"},
							{"image", p.Image},
							{"imagePullPolicy", "IfNotPresent"},
							{"args", args},
							{"env", seq{
								mapping{{"name", "LEGATE_URL"}, {"value", p.ManagerURL}},
								mapping{{"name", "LEGATE_API_KEY"}, {"valueFrom", keyRef}},
							}},
							{"resources", mapping{{"requests", mapping{{"cpu", "10m"}, {"memory", "32Mi"}}}}},
						}}},
					}},
				}},
			}}},
	}
}

// hpaMetric is the external metric's name an HPA of full reads.
func hpaMetric(full string) string { return "legate_queue_tasks_" + strings.ReplaceAll(full, "-", "_") }

// withoutReplicas is the StatefulSet doc without spec.replicas.
func withoutReplicas(doc mapping) mapping {
	out := make(mapping, 0, len(doc))
	for _, f := range doc {
		if spec, ok := f.val.(mapping); ok && f.key == "spec" {
			kept := mapping{}
			for _, g := range spec {
				if g.key != "replicas" {
					kept = append(kept, g)
				}
			}
			f.val = kept
		}
		out = append(out, f)
	}
	return out
}
