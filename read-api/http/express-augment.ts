// Request fields the HTTP edge adds: a request id (X-Request-Id) and, after authentication,
// tsoa's `user` (our Principal).
declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      id: string;
    }
  }
}
export {};
