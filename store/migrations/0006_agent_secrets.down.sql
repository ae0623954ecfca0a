ALTER TABLE agents DROP COLUMN secrets;
