ALTER TABLE sessions DROP COLUMN inputs_on_notice_lease;
