export { messagesProjection, applyMessageEvents } from './projection.js';
export * from './view.js';
export * from './queries.js';
export { maskEmail, maskEmails, maskEmailsInText } from './pii.js';
