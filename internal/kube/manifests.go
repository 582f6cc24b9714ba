package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxDocuments bounds the documents of one deploy.
const MaxDocuments = 500

// Object is one document of a deploy's manifests.
type Object struct {
	APIVersion, Kind, Name string
	// Namespace is the one the document names ("" for none).
	Namespace string
	// Doc is the document itself, as decoded.
	Doc map[string]any
	// Index is the document's place in the manifests: "manifest 1,
	// document 2" in messages.
	Where string
}

// Ref is "kind/name" as kubectl writes it (deployment/web).
func (o Object) Ref() string { return strings.ToLower(o.Kind) + "/" + o.Name }

// ParseManifests reads the documents of manifests (YAML or JSON text, each
// one document or several separated by ---) in order; empty documents are
// skipped. Each must be a mapping with apiVersion, kind and metadata.name;
// one that names a namespace other than ns is refused. YAML anchors and
// aliases are refused (a small text must not expand into a huge one), and
// so are Lists (give their items as documents).
func ParseManifests(ns string, manifests []string) ([]Object, error) {
	var out []Object
	for i, m := range manifests {
		dec := yaml.NewDecoder(strings.NewReader(m))
		for j := 0; ; j++ {
			where := fmt.Sprintf("manifest %d, document %d", i, j)
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: not valid YAML or JSON: %w", where, err)
			}
			if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
				continue // an empty document: "---" at the start or end
			}
			if len(out) == MaxDocuments {
				return nil, fmt.Errorf("the manifests hold more than %d documents", MaxDocuments)
			}
			o, err := object(ns, n.Content[0], where)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the manifests hold no document")
	}
	return out, nil
}

// object reads one document.
func object(ns string, n *yaml.Node, where string) (Object, error) {
	if err := noAliases(n); err != nil {
		return Object{}, fmt.Errorf("%s: %w", where, err)
	}
	if n.Kind != yaml.MappingNode {
		return Object{}, fmt.Errorf("%s: a Kubernetes object is a mapping (apiVersion:, kind:, metadata:), not a list or a value", where)
	}
	v, err := value(n)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", where, err)
	}
	doc := v.(map[string]any)
	o := Object{Doc: doc, Where: where}
	o.APIVersion, _ = doc["apiVersion"].(string)
	o.Kind, _ = doc["kind"].(string)
	meta, _ := doc["metadata"].(map[string]any)
	if meta != nil {
		o.Name, _ = meta["name"].(string)
		o.Namespace, _ = meta["namespace"].(string)
	}
	switch {
	case o.APIVersion == "" || o.Kind == "":
		return Object{}, fmt.Errorf("%s: needs apiVersion and kind", where)
	case o.Name == "":
		return Object{}, fmt.Errorf("%s (%s): needs metadata.name (generateName is not supported: an apply needs a name)", where, o.Kind)
	case strings.HasSuffix(o.Kind, "List"):
		return Object{}, fmt.Errorf("%s: a %s is not applied as one object: give its items as documents", where, o.Kind)
	case meta["namespace"] != nil && o.Namespace != ns:
		return Object{}, fmt.Errorf("%s (%s): names the namespace %q, but this step deploys to %q: a step deploys to its own namespace only", where, o.Ref(), o.Namespace, ns)
	}
	if strings.ContainsAny(o.Name, "/?#%") || o.Name == "." || o.Name == ".." {
		return Object{}, fmt.Errorf("%s: metadata.name %q is not a valid name", where, o.Name)
	}
	return o, nil
}

// value is n as JSON would hold it: mappings with text keys (each once),
// lists, and scalars by their YAML type; a timestamp and binary stay the
// text they were written as (Kubernetes reads text there), never a
// reformatted date.
func value(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool" && k.ShortTag() != "!!float" {
				return nil, fmt.Errorf("line %d: a key must be text", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: the key %q is given twice", k.Line, k.Value)
			}
			v, err := value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := value(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return nil, fmt.Errorf("line %d: %s is not a number JSON can hold", n.Line, n.Value)
			}
			return v, nil
		}
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return fmt.Errorf("line %d: YAML anchors and aliases (& and *) are not supported in manifests", n.Line)
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// body is the document to apply as JSON, in namespace ns when r is
// namespaced (and without a namespace otherwise).
func (o Object) body(r Resource, ns string) ([]byte, error) {
	meta, _ := o.Doc["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	m := make(map[string]any, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	if r.Namespaced {
		m["namespace"] = ns
	} else {
		delete(m, "namespace")
	}
	doc := make(map[string]any, len(o.Doc))
	for k, v := range o.Doc {
		doc[k] = v
	}
	doc["metadata"] = m
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
