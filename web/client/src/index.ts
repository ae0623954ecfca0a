export { ApiError, SessionsClient, SharedClient, readEnvelope } from './api';
export type { AnswerBody, ClientOptions, CreateShareBody, SendInputBody } from './api';
export { SessionTransport, sendInputOnce, waitForNetwork } from './transport';
export type { SessionTransportOptions, StreamPosition } from './transport';
export { summarizeUsage } from './usage';
export type { UsageSummary } from './usage';
export type * from './types';
