/** The version of this client, sent in its User-Agent. */
export const CLIENT_VERSION = '1.0.0'
