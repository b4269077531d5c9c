/**
 * What a one-line text of the API (a list, contact or campaign name, a suppression note) cannot
 * hold: C0 and C1 controls, DEL, and the Unicode line and paragraph separators U+2028 and U+2029,
 * which break a line in the dashboards, CSV exports and mail clients that show these texts as
 * surely as a line feed does.
 */
// eslint-disable-next-line no-control-regex
export const NOT_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
