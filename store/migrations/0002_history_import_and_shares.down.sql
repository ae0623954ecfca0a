DROP TABLE IF EXISTS session_shares;
DROP TABLE IF EXISTS imported_messages;
