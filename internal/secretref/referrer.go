package secretref

import "context"

type referrerKey struct{}

// ReferredBy names, for the refusals of the check of a text's secret
// references, what holds the text when it is not a task: "configuration"
// for a delegate configuration's script, "delegate token" for the
// secrets a token gives INIT_SCRIPT. The check runs on a task's spec in
// every case, so it cannot tell them apart by itself.
func ReferredBy(ctx context.Context, what string) context.Context {
	return context.WithValue(ctx, referrerKey{}, what)
}

// Referrer is what ReferredBy named in ctx, "task" when nothing was.
func Referrer(ctx context.Context) string {
	if s, ok := ctx.Value(referrerKey{}).(string); ok && s != "" {
		return s
	}
	return "task"
}
