package manifest

// podTaskRules are what a delegate installed in Kubernetes needs to run
// container tasks as pods, in its own namespace only: its pods (created,
// followed, deleted, listed by label after a restart), their logs and
// events (read), and one Secret per task for its secret values. The same
// Role is in docs/task-containers.md.
func podTaskRules() seq {
	rule := func(resource string, verbs ...string) mapping {
		vs := seq{}
		for _, v := range verbs {
			vs = append(vs, v)
		}
		return mapping{{"apiGroups", seq{""}}, {"resources", seq{resource}}, {"verbs", vs}}
	}
	return seq{
		rule("pods", "create", "get", "list", "watch", "delete"),
		rule("pods/log", "get"),
		rule("events", "get", "list", "watch"),
		rule("secrets", "create", "get", "list", "delete"),
	}
}

// podTaskRBAC is a Role of podTaskRules in the delegate's namespace and
// its binding, whatever the deployer's rights (cluster, namespace): they
// may be narrowed without taking container tasks away. None with rbac
// none (no token is mounted: the delegate has no container runtime).
func podTaskRBAC(p Params, full string, meta func(name string, namespaced bool) mapping) []mapping {
	if p.RBAC == rbacNone {
		return nil
	}
	name := full + "-pod-tasks"
	return []mapping{
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta(name, true)}, {"rules", podTaskRules()}},
		{{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "RoleBinding"}, {"metadata", meta(name, true)},
			{"roleRef", mapping{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
			{"subjects", seq{mapping{{"kind", "ServiceAccount"}, {"name", full}, {"namespace", p.Namespace}}}}},
	}
}
