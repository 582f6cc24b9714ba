package kube

import (
	"context"
	"fmt"
	"net/url"
)

// scale is the part of a scale subresource (autoscaling/v1 Scale) that
// scaling reads.
type scale struct {
	Spec struct {
		Replicas int `json:"replicas"`
	} `json:"spec"`
}

func scalePath(ns, statefulSet string) string {
	return "/apis/apps/v1/namespaces/" + url.PathEscape(ns) + "/statefulsets/" + url.PathEscape(statefulSet) + "/scale"
}

// StatefulSetReplicas reads a StatefulSet's spec.replicas through its scale
// subresource (what an RBAC role limited to statefulsets/scale allows).
func (c *Client) StatefulSetReplicas(ctx context.Context, ns, statefulSet string) (int, error) {
	var s scale
	if err := c.Get(ctx, scalePath(ns, statefulSet), &s); err != nil {
		return 0, fmt.Errorf("read the scale of statefulset %s/%s: %w", ns, statefulSet, err)
	}
	return s.Spec.Replicas, nil
}

// ScaleStatefulSet sets a StatefulSet's spec.replicas through its scale
// subresource.
func (c *Client) ScaleStatefulSet(ctx context.Context, ns, statefulSet string, replicas int) error {
	patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/replicas","value":%d}]`, replicas)
	if err := c.Patch(ctx, scalePath(ns, statefulSet), patch, nil); err != nil {
		return fmt.Errorf("scale statefulset %s/%s to %d: %w", ns, statefulSet, replicas, err)
	}
	return nil
}
