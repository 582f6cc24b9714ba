//go:build !delegate

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/autoscaler"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/kube"
	"github.com/legate-dev/legate/internal/protocol"
)

func newAutoscalerCmd() *cobra.Command {
	var cfg autoscaler.Config
	var bounds, selectors string
	cmd := &cobra.Command{
		Use:   "autoscaler",
		Short: "Set a delegate StatefulSet's replicas from its queue signal (run by a Deployment)",
		Long: `Run until stopped: every --interval, read the queue signal of the delegates'
selector set from the manager (GET /api/v1/queue?selectors=...: the queued
tasks those delegates could take) and the tasks they run, and set the
StatefulSet's replicas (its scale subresource) to what they need, within
--bounds MIN:MAX. It scales out at once; it scales in one replica at a time,
--cool-down after the last change, and only when the replica that goes (the
highest ordinal, STATEFULSET-N) runs no task.

The manager's URL and an API key with task:view and delegate:view at the
account come from LEGATE_URL and LEGATE_API_KEY. The Kubernetes credentials
are the pod's ServiceAccount (or KUBECONFIG); it needs get and patch on the
StatefulSet's scale only. See docs/elastic.md.`,
		Example: `  legate manifest kubernetes --new-token k8s --name prod --autoscale 1:10 | kubectl apply -f -`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lo, hi, err := parseBounds(bounds)
			if err != nil {
				return err
			}
			cfg.Min, cfg.Max = lo, hi
			cfg.Selectors = protocol.SplitTags(selectors)
			url, key := os.Getenv("LEGATE_URL"), os.Getenv("LEGATE_API_KEY")
			if url == "" || key == "" {
				return errors.New("autoscaler: set LEGATE_URL (the manager) and LEGATE_API_KEY (an API key with task:view and delegate:view)")
			}
			mc, err := client.New(url, nil)
			if err != nil {
				return err
			}
			mc.SetSecret(key)
			kc, err := kube.Load(os.Getenv, kube.ServiceAccountDir)
			if err != nil {
				return err
			}
			if cfg.Namespace == "" {
				cfg.Namespace = kc.Namespace
			}
			k, err := kube.NewClient(kc)
			if err != nil {
				return err
			}
			defer k.Close()
			cfg.Manager, cfg.Cluster = mc, k
			cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("component", "autoscaler")
			a, err := autoscaler.New(cfg)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Namespace, "namespace", "", "the StatefulSet's namespace (default: the ServiceAccount's)")
	f.StringVar(&cfg.StatefulSet, "statefulset", "", "the delegates' StatefulSet")
	f.StringVar(&cfg.Delegate, "delegate", "", "the delegates' DELEGATE_NAME")
	f.StringVar(&selectors, "selectors", "", "the delegates' tags, comma-separated: the selector set whose queue sizes them")
	f.StringVar(&bounds, "bounds", "1:10", "MIN:MAX replicas")
	f.IntVar(&cfg.TasksPerReplica, "tasks-per-replica", autoscaler.DefaultTasksPerReplica, "tasks one replica runs at once (its DELEGATE_CAPACITY)")
	f.DurationVar(&cfg.Interval, "interval", autoscaler.DefaultInterval, "how often to read the queue signal")
	f.DurationVar(&cfg.CoolDown, "cool-down", autoscaler.DefaultCoolDown, "how long after the last change to wait before scaling in")
	return cmd
}

// parseBounds reads MIN:MAX.
func parseBounds(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, ":")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || lo < 0 || hi < 1 || lo > hi {
		return 0, 0, fmt.Errorf("bounds %q: want MIN:MAX replicas, such as 1:10 (0 <= MIN <= MAX, MAX >= 1)", s)
	}
	return lo, hi, nil
}
