import { Handlers } from "@cairn/store";
export declare const notesHandlers: Handlers.Handlers;
