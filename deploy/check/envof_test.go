package check

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/legate-dev/legate/internal/manifest"
)

// envOf returns the environment that an artifact of kind (the output of
// legate manifest KIND, or with kind "chart" a rendered delegate chart)
// gives the delegate, read with the real types: the StatefulSet's
// container env with secretKeyRef values resolved from the Secret in the
// same output (rendered from the values file for helm), the ECS container
// definition's environment and secrets, the docker run --env flags (of
// the first command) or the compose service's environment, the systemd
// environment file. A value that lives outside the artifact (an existing
// Kubernetes Secret, a Secrets Manager ARN) is given as "valueFrom:" and
// the reference ("valueFrom:secret/NAME/KEY", "valueFrom:arn:...").
//
// It is the helper the image e2e tests use to start a delegate with an
// artifact's own environment.
func envOf(kind, output string) (map[string]string, error) {
	switch kind {
	case manifest.KindKubernetes, "chart":
		objs, err := decodeK8s(output)
		if err != nil {
			return nil, err
		}
		return k8sEnv(objs)
	case manifest.KindHelm:
		rendered, err := renderDelegateValues(output)
		if err != nil {
			return nil, err
		}
		return envOf("chart", rendered)
	case manifest.KindDocker:
		if strings.HasPrefix(output, "docker run") {
			runs, err := parseDockerRuns(output)
			if err != nil {
				return nil, err
			}
			return runs[0].Env, nil
		}
		c, err := decodeCompose(output)
		if err != nil {
			return nil, err
		}
		for _, s := range c.Services {
			env := map[string]string{}
			for k, v := range s.Environment {
				env[k] = composeValue(v)
			}
			return env, nil
		}
	case manifest.KindECS, manifest.KindFargate:
		td, err := decodeTaskDefinition(output)
		if err != nil {
			return nil, err
		}
		env := map[string]string{}
		c := td.ContainerDefinitions[0]
		for _, kv := range c.Environment {
			env[deref(kv.Name)] = deref(kv.Value)
		}
		for _, s := range c.Secrets {
			env[deref(s.Name)] = "valueFrom:" + deref(s.ValueFrom)
		}
		return env, nil
	case manifest.KindSystemd:
		s, err := parseSystemd(output)
		if err != nil {
			return nil, err
		}
		return s.EnvFile, nil
	}
	return nil, fmt.Errorf("envOf: unknown kind %q", kind)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// k8sEnv is the env of the delegate container of the one StatefulSet.
func k8sEnv(objs []k8sObject) (map[string]string, error) {
	secrets := map[string]*corev1.Secret{}
	var sts []*appsv1.StatefulSet
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *corev1.Secret:
			secrets[v.Name] = v
		case *appsv1.StatefulSet:
			sts = append(sts, v)
		}
	}
	if len(sts) != 1 {
		return nil, fmt.Errorf("%d StatefulSets, want 1", len(sts))
	}
	cs := sts[0].Spec.Template.Spec.Containers
	if len(cs) != 1 {
		return nil, fmt.Errorf("%d containers, want 1", len(cs))
	}
	env := map[string]string{}
	for _, e := range cs[0].Env {
		if _, dup := env[e.Name]; dup {
			return nil, fmt.Errorf("env %s twice", e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, ok := secrets[ref.Name]
			if !ok {
				env[e.Name] = "valueFrom:secret/" + ref.Name + "/" + ref.Key
				continue
			}
			if v, ok := s.StringData[ref.Key]; ok {
				env[e.Name] = v
			} else if v, ok := s.Data[ref.Key]; ok {
				env[e.Name] = string(v)
			} else {
				return nil, fmt.Errorf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
		default:
			return nil, fmt.Errorf("env %s: a valueFrom other than a secretKeyRef", e.Name)
		}
	}
	return env, nil
}
