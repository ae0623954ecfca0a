package store

import (
	"strings"
	"testing"
)

// The statements a Relay batch pipelines are also run through GORM by the single-fact
// methods, which read a statement holding '@' as one with named arguments and would
// no longer pass the positional arguments through.
func TestPipelinedStatementsAreSafeForGORM(t *testing.T) {
	for name, sql := range map[string]string{
		"lockLeasesAndOutputSeqsSQL": lockLeasesAndOutputSeqsSQL, "admitInputsSQL": admitInputsSQL,
		"startResponseSQL": startResponseSQL, "endResponseSQL": endResponseSQL,
		"openInteractionSQL": openInteractionSQL, "closeInteractionSQL": closeInteractionSQL,
		"setRuntimeStatusSQL": setRuntimeStatusSQL, "appendPartsOnlySQL": appendPartsOnlySQL, "appendPartsGroupSQL": appendPartsGroupSQL, "upsertCursorSQL": upsertCursorSQL,
		"startResponseAfterOutputSQL": startResponseAfterOutputSQL, "endResponseAfterOutputSQL": endResponseAfterOutputSQL,
		"upsertCursorAfterOutputSQL": upsertCursorAfterOutputSQL, "appendSessionLogSQL": appendSessionLogSQL,
		"upsertChildRunSQL": upsertChildRunSQL, "appendDiagnosticSQL": appendDiagnosticSQL,
		"appendSessionLogsGroupSQL": appendSessionLogsGroupSQL, "admitInputsGroupSQL": admitInputsGroupSQL,
		"startResponsesGroupSQL": startResponsesGroupSQL, "endResponsesGroupSQL": endResponsesGroupSQL,
	} {
		if strings.Contains(sql, "@") {
			t.Errorf("%s holds '@': GORM would read its arguments as named ones", name)
		}
		if strings.Contains(sql, "?") {
			t.Errorf("%s holds '?': pgx sends it as it is, and PostgreSQL's placeholders are $1, $2, ...", name)
		}
	}
}
