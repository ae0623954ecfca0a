DROP TABLE runtime_diagnostics;
