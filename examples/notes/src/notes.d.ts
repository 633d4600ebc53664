/**
 * The notes example's definitions, root schema `notes`: one entity, `Note`, written by
 * its author and, in a team database, optionally shared with the team. Descriptions are
 * written for AI agents: each says what a definition is for and what to call next.
 */
import { Schema } from "effect";
import { Entity, Operation, RootSchema } from "@cairn/catalog";
export declare const Note: Entity.Entity<"Note", {
    readonly authorId: Schema.SchemaClass<string, string, never>;
    readonly title: Schema.filter<Schema.filter<typeof Schema.String>>;
    readonly body: Schema.filter<typeof Schema.String>;
    readonly shared: Schema.SchemaClass<boolean, boolean, never>;
    readonly createdAt: Schema.refine<string, typeof Schema.String>;
    readonly updatedAt: Schema.refine<string, typeof Schema.String>;
}>;
export declare const NoteCreate: Operation.Operation<"Note", "create", Schema.Struct<{
    title: Schema.filter<Schema.filter<typeof Schema.String>>;
    body: Schema.filter<typeof Schema.String>;
    shared: Schema.optional<typeof Schema.Boolean>;
}>, Schema.Struct<{
    id: Schema.SchemaClass<string, string, never>;
}>, false>;
export declare const NoteEdit: Operation.Operation<"Note", "edit", Schema.Struct<{
    body: Schema.filter<typeof Schema.String>;
}>, Schema.Struct<{}>, true>;
export declare const NoteShare: Operation.Operation<"Note", "share", Schema.Struct<{}>, Schema.Struct<{}>, true>;
export declare const notes: RootSchema.RootSchema<"notes", readonly [Entity.Entity<"Note", {
    readonly authorId: Schema.SchemaClass<string, string, never>;
    readonly title: Schema.filter<Schema.filter<typeof Schema.String>>;
    readonly body: Schema.filter<typeof Schema.String>;
    readonly shared: Schema.SchemaClass<boolean, boolean, never>;
    readonly createdAt: Schema.refine<string, typeof Schema.String>;
    readonly updatedAt: Schema.refine<string, typeof Schema.String>;
}>], readonly [Operation.Operation<"Note", "create", Schema.Struct<{
    title: Schema.filter<Schema.filter<typeof Schema.String>>;
    body: Schema.filter<typeof Schema.String>;
    shared: Schema.optional<typeof Schema.Boolean>;
}>, Schema.Struct<{
    id: Schema.SchemaClass<string, string, never>;
}>, false>, Operation.Operation<"Note", "edit", Schema.Struct<{
    body: Schema.filter<typeof Schema.String>;
}>, Schema.Struct<{}>, true>, Operation.Operation<"Note", "share", Schema.Struct<{}>, Schema.Struct<{}>, true>]>;
