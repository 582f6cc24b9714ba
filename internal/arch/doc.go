// Package arch holds no code: its tests enforce the layout rules of
// docs/design.md §9 (which internal packages may import which, stdlib-only
// protocol, and a doc comment on every package).
package arch
