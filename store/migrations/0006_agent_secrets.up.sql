-- An Agent's secret values (its MCP servers' env values and headers), sealed with
-- AES-256-GCM under the platform's secrets.key. The config column holds a redaction
-- marker in their place; secrets maps JSON pointers into config to the values.
ALTER TABLE agents ADD COLUMN secrets bytea;
