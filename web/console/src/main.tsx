import './zod-config';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { takeTokenFromFragment } from './auth';
import { App } from './App';
import './styles.css';

takeTokenFromFragment();
createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
