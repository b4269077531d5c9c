export { analyticsProjection, applyAnalyticsEvents } from './projection';
export * from './queries';
export * from './sendPolicy';
