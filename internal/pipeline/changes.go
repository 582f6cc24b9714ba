package pipeline

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Changes says briefly what an apply of newSrc changes in a pipeline
// stored as oldSrc (both files Parse accepts), one line per change, in
// file order: "description changed", "inputs: added region", "stage
// deploy: steps added smoke; changed rollout", "stage verify added". The
// files are compared by their meaning: comments, quoting and layout do not
// count; a file that differs only there gives "comments or layout only".
// Nil when the two files are the same.
func Changes(oldSrc, newSrc []byte) []string {
	if string(oldSrc) == string(newSrc) {
		return nil
	}
	oldTop, newTop := topFields(oldSrc), topFields(newSrc)
	var out []string
	for _, k := range unionKeys(oldTop, newTop) {
		o, n := oldTop.get(k), newTop.get(k)
		switch {
		case k == "stages":
			out = append(out, stageChanges(o, n)...)
		case k == "inputs":
			if d := keyedChanges(mapEntries(o), mapEntries(n)); d != "" {
				out = append(out, "inputs: "+d)
			}
		case o == nil:
			out = append(out, k+" added")
		case n == nil:
			out = append(out, k+" removed")
		case canonical(o) != canonical(n):
			out = append(out, k+" changed")
		}
	}
	if len(out) == 0 {
		return []string{"comments or layout only"}
	}
	return out
}

// entries are the keys of a mapping, in order, with their values.
type entries struct {
	keys []string
	vals map[string]*yaml.Node
}

func (e entries) get(k string) *yaml.Node { return e.vals[k] }

func mapEntries(n *yaml.Node) entries {
	e := entries{vals: map[string]*yaml.Node{}}
	if n == nil || n.Kind != yaml.MappingNode {
		return e
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		e.keys = append(e.keys, k)
		e.vals[k] = n.Content[i+1]
	}
	return e
}

func topFields(src []byte) entries {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) == 0 {
		return entries{vals: map[string]*yaml.Node{}}
	}
	return mapEntries(doc.Content[0])
}

// unionKeys: the new file's keys in its order, then those only the old
// file has.
func unionKeys(o, n entries) []string {
	out := slices.Clone(n.keys)
	for _, k := range o.keys {
		if _, ok := n.vals[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// keyedChanges compares named entries: "added a, b; removed c; changed d".
func keyedChanges(o, n entries) string {
	var added, removed, changed []string
	for _, k := range unionKeys(o, n) {
		ov, nv := o.get(k), n.get(k)
		switch {
		case ov == nil:
			added = append(added, k)
		case nv == nil:
			removed = append(removed, k)
		case canonical(ov) != canonical(nv):
			changed = append(changed, k)
		}
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// named turns a list of mappings with a name: field into entries by name
// (the steps of parallel groups flattened into the list).
func named(n *yaml.Node) (e entries) {
	e.vals = map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.SequenceNode {
		return e
	}
	for _, c := range n.Content {
		if p := mapEntries(c).get("parallel"); p != nil {
			sub := named(p)
			for _, k := range sub.keys {
				e.keys = append(e.keys, k)
				e.vals[k] = sub.vals[k]
			}
			continue
		}
		name := ""
		if v := mapEntries(c).get("name"); v != nil {
			name = v.Value
		}
		e.keys = append(e.keys, name)
		e.vals[name] = c
	}
	return e
}

func stageChanges(o, n *yaml.Node) []string {
	os, ns := named(o), named(n)
	var out []string
	for _, k := range unionKeys(os, ns) {
		ov, nv := os.get(k), ns.get(k)
		switch {
		case ov == nil:
			out = append(out, "stage "+k+" added")
			continue
		case nv == nil:
			out = append(out, "stage "+k+" removed")
			continue
		case canonical(ov) == canonical(nv):
			continue
		}
		of, nf := mapEntries(ov), mapEntries(nv)
		var parts []string
		for _, f := range unionKeys(of, nf) {
			if f != "steps" && f != "name" && canonical(of.get(f)) != canonical(nf.get(f)) {
				parts = append(parts, f+" changed")
			}
		}
		oSteps, nSteps := named(of.get("steps")), named(nf.get("steps"))
		if d := keyedChanges(oSteps, nSteps); d != "" {
			parts = append(parts, "steps "+d)
		} else if !slices.Equal(oSteps.keys, nSteps.keys) || canonical(of.get("steps")) != canonical(nf.get("steps")) {
			parts = append(parts, "steps reordered or regrouped")
		}
		out = append(out, "stage "+k+": "+strings.Join(parts, "; "))
	}
	if len(out) == 0 && !slices.Equal(os.keys, ns.keys) {
		out = append(out, "stages reordered")
	}
	return out
}

// canonical renders a node without what does not change its meaning:
// comments, positions and quoting.
func canonical(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	b, err := yaml.Marshal(strip(n))
	if err != nil {
		return ""
	}
	return string(b)
}

func strip(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	c.Line, c.Column, c.Style = 0, 0, 0
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = strip(k)
	}
	return &c
}
