package loadbench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatementsPerTurnNameTheMostFrequentByTheirOpening(t *testing.T) {
	t.Parallel()
	before := statementCounts{"BEGIN": 10, "COMMIT": 10, "SELECT 1": 3}
	after := statementCounts{
		"BEGIN": 30, "COMMIT": 30, "SELECT 1": 3,
		"WITH b AS (\n\tSELECT *\n\tFROM jsonb_to_recordset($1) AS b(session_id uuid, seq bigint)\n)": 50,
		"UPDATE sessions SET runtime_status = $1 WHERE id = $2":                                       4,
		"UPDATE sessions SET runtime_status = $1, updated_at = now() WHERE id = $2":                   6,
		"SELECT id FROM inputs WHERE session_id = $1":                                                 1,
	}
	ran := after.since(before)
	assert.NotContains(t, ran, "SELECT 1", "a statement that did not run since is left out")
	assert.Equal(t, "10.1 (most often: WITH b AS ( SELECT * ... 5.0; BEGIN 2.0; COMMIT 2.0; UPDATE sessions SET runtime_status = $1, ... 0.6)",
		ran.perTurn(10))
	assert.Equal(t, "none", statementCounts{}.perTurn(10))
	assert.Equal(t, "5.00\tWITH b AS ( SELECT * FROM jsonb_to_recordset($1) AS b(session_id uuid, seq bigint) )\n2.00\tBEGIN\n2.00\tCOMMIT\n",
		statementCounts{"COMMIT": 20, "BEGIN": 20, "WITH b AS (\n\tSELECT *\n\tFROM jsonb_to_recordset($1) AS b(session_id uuid, seq bigint)\n)": 50}.table(10),
		"the whole list, most often first, each statement on one line")
}

func TestAStatementsOpeningIsItsFirstWords(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "COMMIT", statementOpening("COMMIT"))
	assert.Equal(t, "SELECT id FROM inputs WHERE session_id ...", statementOpening("SELECT id FROM inputs\n\tWHERE session_id = $1"))
	assert.Equal(t, "SELECT a_very_long_column_name, another_very_lon ...", statementOpening("SELECT a_very_long_column_name, another_very_long_column_name FROM t"))
}
