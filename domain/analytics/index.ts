export * from './providers';
export * from './rates';
export * from './reputation';
export * from './anomalies';
export * from './throttle';
export * from './warmup';
