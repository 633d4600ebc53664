/** Record ids: UUIDv7 from the pooled random source shared with clients' invocation ids (`@cairn/domain/Uuid`). */
export { uuidV7 as newId } from "@cairn/domain/Uuid"
