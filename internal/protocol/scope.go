package protocol

// Covers reports whether a delegate scope covers a task scope: account
// delegates (dOrg "") serve every task of the account; org delegates serve
// the org- and project-level tasks of their org; project delegates serve
// only the tasks of their exact org and project. Names match exactly (they
// are identifiers). A project without an org counts as account level, on
// either side.
//
// It is the one scope rule between delegates and what they serve: the
// tasks offered to them and those they report on. Configurations, which
// run as the delegate's user, apply the other way round: a
// configuration's scope must cover the delegate's (Covers(cOrg, cProject,
// dOrg, dProject)), so a narrower scope never runs code on a wider
// scope's delegate.
func Covers(dOrg, dProject, tOrg, tProject string) bool {
	switch {
	case dOrg == "":
		return true
	case dProject == "":
		return tOrg == dOrg
	default:
		return tOrg == dOrg && tProject == dProject
	}
}

// ScopeLabel names a scope as the manager's messages, logs and pages do:
// "account", "org ORG" or "project ORG/PROJECT".
func ScopeLabel(org, project string) string {
	switch {
	case org == "":
		return "account"
	case project == "":
		return "org " + org
	default:
		return "project " + org + "/" + project
	}
}
