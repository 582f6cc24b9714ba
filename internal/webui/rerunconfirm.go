package webui

import (
	"fmt"
	"html/template"
	"net/http"

	"go.yaml.in/yaml/v3"
)

// The run page's Re-run button re-runs the run's definition, the version
// the run ran. When that is not the pipeline's current version, or when
// the definition deploys, a click would (re)deploy something that may be
// old: the button answers a page that says so and asks to confirm, whose
// form posts again with confirm=yes. The step works without JavaScript,
// and a script cannot skip it. A re-run of the current version of a
// pipeline that deploys nothing stays one click.

// rerunConfirmRoutes registers the confirmation page.
func (u *UI) rerunConfirmRoutes() {
	u.pages["rerunconfirm"] = template.Must(template.New("rerunconfirm").Funcs(funcs).ParseFS(templateFS,
		"templates/layout.html", "templates/fragments.html", "templates/rerunconfirm.html"))
}

// rerunConfirmView is the page that asks before a re-run.
type rerunConfirmView struct {
	runForm
	CSRF string
	// Old: the run's version is not the pipeline's current one.
	Old bool
}

// needsConfirm reports whether a re-run from the form v asks first.
func (v runForm) needsConfirm() bool {
	return (v.Current != 0 && v.Current != v.Version) || len(v.Deploys) > 0
}

// confirmRerun answers the confirmation page when the re-run of v asks
// first and the form did not confirm it; it reports whether it did.
func (u *UI) confirmRerun(w http.ResponseWriter, r *http.Request, s *user, v runForm) bool {
	if r.PostFormValue("confirm") == "yes" || !v.needsConfirm() {
		return false
	}
	c := rerunConfirmView{runForm: v, CSRF: s.csrf, Old: v.Current != 0 && v.Current != v.Version}
	u.render(w, r, s, http.StatusOK, "rerunconfirm", page{Title: "Re-run " + v.Run + "?", Nav: "runs", Data: c})
	return true
}

// deploysOf names what a pipeline definition deploys: its deployment
// stages (an environment or a service) and its kubernetes and helm steps.
// The UI reads the YAML the API answers; a definition it cannot read
// counts as one that deploys, so that the re-run asks.
func deploysOf(source string) []string {
	var def struct {
		Stages []struct {
			Name        string      `yaml:"name"`
			Environment string      `yaml:"environment"`
			Service     string      `yaml:"service"`
			Steps       []yaml.Node `yaml:"steps"`
		} `yaml:"stages"`
	}
	if err := yaml.Unmarshal([]byte(source), &def); err != nil {
		return []string{"a definition the page cannot read"}
	}
	var out []string
	for _, st := range def.Stages {
		if st.Environment != "" || st.Service != "" {
			what := "stage " + st.Name + " deploys"
			if st.Service != "" {
				what += " service " + st.Service
			}
			if st.Environment != "" {
				what += " to environment " + st.Environment
			}
			out = append(out, what)
		}
		for i := range st.Steps {
			out = append(out, deploySteps(st.Name, &st.Steps[i])...)
		}
	}
	return out
}

// deploySteps names the kubernetes and helm steps of a step entry (a
// step, or a parallel group of them).
func deploySteps(stage string, n *yaml.Node) []string {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var out []string
	name := ""
	var kinds []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "name":
			name = val.Value
		case "kubernetes", "helm":
			kinds = append(kinds, k)
		case "parallel":
			for _, c := range val.Content {
				out = append(out, deploySteps(stage, c)...)
			}
		}
	}
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("step %s of stage %s is a %s step", name, stage, k))
	}
	return out
}
