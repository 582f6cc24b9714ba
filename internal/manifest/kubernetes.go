package manifest

import (
	"strings"
)

// kubernetes prints the Namespace, the token's Secret (unless it exists),
// the ServiceAccount, its RBAC and the StatefulSet, as the seeds' delegate
// YAML does: one StatefulSet per delegate whose replicas are the
// delegate's instances, named NAME-CODE with the account's six-letter
// code so that two clusters' delegates never collide.
func kubernetes(p Params) string {
	full := k8sFullName(p)
	labels := k8sLabels(p)
	meta := func(name string, namespaced bool) mapping {
		m := mapping{{"name", name}}
		if namespaced {
			m = append(m, field{"namespace", p.Namespace})
		}
		return append(m, field{"labels", labels})
	}
	docs := []mapping{{
		{"apiVersion", "v1"}, {"kind", "Namespace"},
		{"metadata", mapping{{"name", p.Namespace}, {"labels", mapping{{LabelPrefix + "app", "legate-delegate"}}}}},
	}}
	secret := p.TokenSecret
	if p.Token != "" {
		secret = full + "-token"
		docs = append(docs, mapping{
			{"apiVersion", "v1"}, {"kind", "Secret"},
			{"metadata", meta(secret, true)},
			{"type", "Opaque"},
			{"stringData", mapping{{TokenKey, p.Token}}},
		})
	}
	docs = append(docs, mapping{
		{"apiVersion", "v1"}, {"kind", "ServiceAccount"},
		{"metadata", meta(full, true)},
		{"automountServiceAccountToken", p.RBAC != rbacNone},
	})
	docs = append(docs, k8sRBAC(p, full, meta)...)
	docs = append(docs, podTaskRBAC(p, full, meta)...)

	env := seq{}
	for i, e := range delegateEnv(p, "KUBERNETES") {
		env = append(env, mapping{{"name", e.Name}, {"value", e.Value}})
		if i == 0 { // the token right after the account, as in the seeds
			env = append(env, mapping{{"name", TokenKey}, {"valueFrom", mapping{{"secretKeyRef", mapping{{"name", secret}, {"key", TokenKey}}}}}})
		}
	}
	container := k8sOptions(p, k8sContainer(p, env))
	stsMeta := meta(full, true)
	stsMeta = append(stsMeta, field{"annotations", mapping{{LabelPrefix + "upgrade", p.Upgrade}}})
	selector := mapping{{LabelPrefix + "app", "legate-delegate"}, {LabelPrefix + "account", AccountCode(p.AccountID)}, {LabelPrefix + "name", p.Name}}
	docs = append(docs, mapping{
		{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"},
		{"metadata", stsMeta},
		{"spec", mapping{
			// One delegate, many replicas: the seeds' rule for HA.
			{"replicas", p.Replicas},
			{"podManagementPolicy", "Parallel"},
			{"selector", mapping{{"matchLabels", selector}}},
			{"template", mapping{
				{"metadata", mapping{{"labels", labels}}},
				{"spec", mapping{
					{"serviceAccountName", full},
					{"automountServiceAccountToken", p.RBAC != rbacNone},
					{"terminationGracePeriodSeconds", DrainSeconds},
					{"containers", seq{container}},
				}},
			}},
		}},
	})
	if p.Autoscale != "" {
		// The autoscaler owns spec.replicas: applying the manifest again
		// must not reset it (a new StatefulSet starts at 1).
		docs[len(docs)-1] = withoutReplicas(docs[len(docs)-1])
	}
	if automatic(p) {
		docs = append(docs, upgraderDocs(p, env, meta)...)
	}
	if p.Autoscale != "" {
		comment, more := autoscaleDocs(p, meta)
		return yamlDocs("", docs...) + "---\n" + yamlDocs(comment, more...)
	}
	return yamlDocs("", docs...)
}

// k8sRBAC is the delegate's role and its binding: the seeds' delegate
// deploys, so its rights are those of a deployer, over every namespace
// (cluster) or its own (namespace); none with rbac none.
func k8sRBAC(p Params, full string, meta func(name string, namespaced bool) mapping) []mapping {
	rules := seq{mapping{{"apiGroups", seq{"*"}}, {"resources", seq{"*"}}, {"verbs", seq{"*"}}}}
	subjects := seq{mapping{{"kind", "ServiceAccount"}, {"name", full}, {"namespace", p.Namespace}}}
	switch p.RBAC {
	case rbacCluster:
		role := p.Namespace + "-" + full // cluster-wide: unique per namespace
		return []mapping{
			{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "ClusterRole"}, {"metadata", meta(role, false)}, {"rules", rules}},
			{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "ClusterRoleBinding"}, {"metadata", meta(role, false)},
				{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
				{"subjects", subjects}}}
	case rbacNamespace:
		return []mapping{
			{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta(full, true)}, {"rules", rules}},
			{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"}, {"metadata", meta(full, true)},
				{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", full}}},
				{"subjects", subjects}}}
	}
	return nil
}

// k8sContainer is the delegate's container: image, environment, probes
// and resource requests.
func k8sContainer(p Params, env seq) mapping {
	probe := func(path string, period, failures int) mapping {
		return mapping{
			{"httpGet", mapping{{"path", path}, {"port", "http"}}},
			{"periodSeconds", period},
			{"timeoutSeconds", 5},
			{"failureThreshold", failures},
		}
	}
	return mapping{
		{"name", "delegate"},
		{"image", p.Image},
		{"imagePullPolicy", "IfNotPresent"},
		{"args", seq{"delegate"}},
		{"env", env},
		{"ports", seq{mapping{{"name", "http"}, {"containerPort", HTTPPort}, {"protocol", "TCP"}}}},
		{"startupProbe", probe("/healthz", 2, 30)},
		{"livenessProbe", probe("/healthz", 10, 3)},
		{"readinessProbe", probe("/readyz", 5, 3)},
		{"resources", mapping{
			{"requests", mapping{{"cpu", p.CPU}, {"memory", p.Memory}}},
		}},
	}
}

// upgraderDocs are the objects of automatic upgrades: an hourly CronJob
// (never two at once) that runs legate upgrader, which asks the manager
// which version the delegate should run and patches the StatefulSet's
// image when it differs; its ServiceAccount may only get and patch that
// one StatefulSet. The StatefulSet's rolling update and the delegates'
// drain (terminationGracePeriodSeconds) keep every task.
func upgraderDocs(p Params, env seq, meta func(string, bool) mapping) []mapping {
	full := k8sFullName(p)
	name := full + "-upgrader"
	upEnv := append(seq{}, env...)
	upEnv = append(upEnv,
		mapping{{"name", "UPGRADER_NAMESPACE"}, {"value", p.Namespace}},
		mapping{{"name", "UPGRADER_STATEFULSET"}, {"value", full}},
	)
	return []mapping{
		{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", meta(name, true)}, {"automountServiceAccountToken", true}},
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta(name, true)},
			{"rules", seq{mapping{{"apiGroups", seq{"apps"}}, {"resources", seq{"statefulsets"}}, {"resourceNames", seq{full}},
				{"verbs", seq{"get", "patch"}}}}}},
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"}, {"metadata", meta(name, true)},
			{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
			{"subjects", seq{mapping{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", p.Namespace}}}}},
		{{"apiVersion", "batch/v1"}, {"kind", "CronJob"}, {"metadata", meta(name, true)},
			{"spec", mapping{
				{"schedule", UpgraderSchedule},
				{"concurrencyPolicy", "Forbid"},
				{"successfulJobsHistoryLimit", 1},
				{"failedJobsHistoryLimit", 3},
				{"jobTemplate", mapping{{"spec", mapping{
					{"backoffLimit", 2},
					{"activeDeadlineSeconds", 600},
					{"template", mapping{
						{"metadata", mapping{{"labels", mapping{{LabelPrefix + "app", "legate-upgrader"}}}}},
						{"spec", mapping{
							{"serviceAccountName", name},
							{"restartPolicy", "Never"},
							{"containers", seq{mapping{
								{"name", "upgrader"},
								{"image", p.Image},
								{"imagePullPolicy", "IfNotPresent"},
								{"args", seq{"upgrader"}},
								{"env", upEnv},
								{"resources", mapping{{"requests", mapping{{"cpu", "10m"}, {"memory", "32Mi"}}}}},
							}}},
						}},
					}},
				}}}},
			}},
		},
	}
}

// UpgraderSchedule is when the upgrader CronJob runs: hourly, as the
// reference's upgrader does.
const UpgraderSchedule = "0 * * * *"

// k8sFullName is the StatefulSet's name: NAME-CODE.
func k8sFullName(p Params) string { return p.Name + "-" + AccountCode(p.AccountID) }

// k8sLabels are the seeds' labels (app, account, name) under LabelPrefix.
// The account label carries the six-letter code, like the name.
func k8sLabels(p Params) mapping {
	return mapping{
		{LabelPrefix + "app", "legate-delegate"},
		{LabelPrefix + "account", AccountCode(p.AccountID)},
		{LabelPrefix + "name", p.Name},
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r < 128 && (isAlnum(byte(r)) || strings.ContainsRune("@%+=:,./_-", r)))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
