package manifest

import "strings"

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
	// The seeds' delegate deploys: its rights are those of a deployer,
	// over every namespace (cluster) or its own (namespace).
	rules := seq{mapping{{"apiGroups", seq{"*"}}, {"resources", seq{"*"}}, {"verbs", seq{"*"}}}}
	subjects := seq{mapping{{"kind", "ServiceAccount"}, {"name", full}, {"namespace", p.Namespace}}}
	switch p.RBAC {
	case rbacCluster:
		role := p.Namespace + "-" + full // cluster-wide: unique per namespace
		docs = append(docs,
			mapping{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "ClusterRole"}, {"metadata", meta(role, false)}, {"rules", rules}},
			mapping{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "ClusterRoleBinding"}, {"metadata", meta(role, false)},
				{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
				{"subjects", subjects}})
	case rbacNamespace:
		docs = append(docs,
			mapping{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta(full, true)}, {"rules", rules}},
			mapping{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"}, {"metadata", meta(full, true)},
				{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", full}}},
				{"subjects", subjects}})
	}

	env := seq{}
	for i, e := range delegateEnv(p, "KUBERNETES") {
		env = append(env, mapping{{"name", e.Name}, {"value", e.Value}})
		if i == 0 { // the token right after the account, as in the seeds
			env = append(env, mapping{{"name", TokenKey}, {"valueFrom", mapping{{"secretKeyRef", mapping{{"name", secret}, {"key", TokenKey}}}}}})
		}
	}
	probe := func(path string, period, failures int) mapping {
		return mapping{
			{"httpGet", mapping{{"path", path}, {"port", "http"}}},
			{"periodSeconds", period},
			{"timeoutSeconds", 5},
			{"failureThreshold", failures},
		}
	}
	container := mapping{
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
	selector := mapping{{LabelPrefix + "app", "legate-delegate"}, {LabelPrefix + "account", AccountCode(p.AccountID)}, {LabelPrefix + "name", p.Name}}
	docs = append(docs, mapping{
		{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"},
		{"metadata", meta(full, true)},
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
	return yamlDocs(docs...)
}

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
