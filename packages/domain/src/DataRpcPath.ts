/** Where `DataRpcs` is served, relative to the deployment's base URL (POST, JSON serialization). */
export const dataRpcPath = "/db/rpc"
