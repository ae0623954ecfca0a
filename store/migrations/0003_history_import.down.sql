DROP TABLE IF EXISTS imported_messages;
