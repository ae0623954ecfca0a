import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The build lands in web/dist, which the Go package web embeds into the binary.
// `npm run dev` proxies the API to a running `astrabox dev` (ASTRABOX_API, default :8080).
export default defineConfig({
  plugins: [react()],
  build: { outDir: '../dist', emptyOutDir: true, chunkSizeWarningLimit: 1024 },
  server: {
    proxy: { '/api': { target: process.env.ASTRABOX_API ?? 'http://127.0.0.1:8080', ws: true } },
  },
});
