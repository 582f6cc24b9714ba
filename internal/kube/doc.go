// Package kube is legate's own minimal client of the Kubernetes API and
// the deploy that the delegate's kubernetes tasks run: credentials from a
// pod's ServiceAccount or a kubeconfig (a token or a client certificate),
// discovery of where a kind lives (cached per deploy), server-side apply
// of each document into the deploy's namespace, the wait for the rollout
// of every Deployment, StatefulSet and DaemonSet applied (with the Warning
// events of their pods), and the rollback of a Deployment to its revision
// from before. It uses the standard library and the YAML library only:
// client-go would add tens of MB to the delegate's binary.
package kube
