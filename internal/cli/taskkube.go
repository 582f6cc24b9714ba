package cli

import (
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/legate-dev/legate/internal/protocol"
)

// kubeFlags are the flags of task run for a kubernetes task.
type kubeFlags struct {
	namespace string
	manifests []string
	rollback  string
}

// kubeFlagNames are the flags only a kubernetes task takes.
var kubeFlagNames = []string{"namespace", "manifest", "rollback"}

func (k *kubeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&k.namespace, "namespace", "", "kubernetes: the namespace to deploy into (required)")
	fl.StringArrayVarP(&k.manifests, "manifest", "f", nil, "kubernetes: a YAML or JSON file of manifests to apply, - for stdin (repeatable, applied in order)")
	fl.StringVar(&k.rollback, "rollback", "", "kubernetes: auto rolls a failed rollout back to the revision before; none (the default) leaves it")
}

// kubeHelp is the part of task run's help about kubernetes tasks.
const kubeHelp = `
A kubernetes task (--type kubernetes, or -f MANIFEST) applies manifests
with server-side apply into --namespace and waits until every Deployment,
StatefulSet and DaemonSet it applied has rolled out, on a delegate that
reaches the cluster. -f takes a file of one or more YAML or JSON documents
(separated by ---); repeat it for more files, applied in order. Here
--timeout bounds the rollout (default 10m, at most 24h) and the task gets
twice that plus a minute, room for --rollback auto, which rolls a failed
Deployment back to the revision it had before. Without --connector the
delegate deploys with its own credentials (its ServiceAccount in a pod,
else its kubeconfig); --connector NAME names a kubernetes connector, whose
cluster and token (a stored secret, which you need secret:access on) the
task uses instead. See docs/deployments.md.
`

// kubernetesSpec turns the flags of a kubernetes task into its spec, and
// sets the task's timeout from the rollout's.
func kubernetesTaskSpec(cmd *cobra.Command, f *runFlags, spec *protocol.TaskSpec) (*protocol.KubernetesSpec, error) {
	fl := cmd.Flags()
	if err := checkNoHTTPFlags(fl); err != nil {
		return nil, err
	}
	for _, name := range []string{"script", "file", "env", "secret-env"} {
		if fl.Changed(name) {
			return nil, usagef("--%s is not for kubernetes tasks: a kubernetes task runs no script (give manifests with -f)", name)
		}
	}
	k := &protocol.KubernetesSpec{Namespace: strings.TrimSpace(f.kube.namespace), Rollback: strings.TrimSpace(f.kube.rollback)}
	if k.Namespace == "" {
		return nil, usagef("a kubernetes task needs --namespace NS, the namespace to deploy into")
	}
	if len(f.kube.manifests) == 0 {
		return nil, usagef("a kubernetes task needs at least one -f MANIFEST.yaml")
	}
	stdinUsed := false
	for _, path := range f.kube.manifests {
		text, err := readManifest(cmd.InOrStdin(), path, &stdinUsed)
		if err != nil {
			return nil, err
		}
		k.Manifests = append(k.Manifests, text)
	}
	rollout := f.timeout
	if rollout == 0 {
		rollout = protocol.DefaultKubernetesTimeoutMS * time.Millisecond
	}
	if rollout > protocol.MaxKubernetesTimeoutMS*time.Millisecond {
		return nil, usagef("--timeout %s: a kubernetes task's rollout may take at most %s", f.timeout, time.Duration(protocol.MaxKubernetesTimeoutMS)*time.Millisecond)
	}
	if fl.Changed("timeout") {
		k.TimeoutMS = max(1, rollout.Milliseconds())
	}
	spec.TimeoutMS = (2*rollout + time.Minute).Milliseconds()
	if err := k.Validate(); err != nil {
		return nil, usagef("%v", err)
	}
	return k, nil
}

// readManifest reads one -f file (- is stdin, once), bounded by what a
// task may carry.
func readManifest(stdin io.Reader, path string, stdinUsed *bool) (string, error) {
	if path == "-" {
		if *stdinUsed {
			return "", usagef("-f - (stdin) given twice")
		}
		*stdinUsed = true
		b, err := io.ReadAll(io.LimitReader(stdin, protocol.MaxKubernetesManifestBytes+1))
		if err != nil {
			return "", usagef("-f -: %v", err)
		}
		if len(b) > protocol.MaxKubernetesManifestBytes {
			return "", usagef("-f -: larger than %d bytes", protocol.MaxKubernetesManifestBytes)
		}
		return string(b), nil
	}
	b, err := readBounded(path, protocol.MaxKubernetesManifestBytes)
	if err != nil {
		return "", usagef("-f %s: %v", path, err)
	}
	return string(b), nil
}

// checkNoKubeFlags refuses the flags of kubernetes tasks in another type.
func checkNoKubeFlags(fl *pflag.FlagSet, typ string) error {
	for _, name := range kubeFlagNames {
		if fl.Changed(name) {
			return usagef("--%s is for kubernetes tasks (--type kubernetes), not %s tasks", name, typ)
		}
	}
	return nil
}
