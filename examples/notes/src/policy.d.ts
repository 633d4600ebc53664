/**
 * The notes policy, unlike the tracker's role and membership rules: a note is its
 * author's alone, except that in a team database a note its author shared is readable
 * by every member of the team. Only the author edits or shares a note; sharing exists
 * only in team databases (the verified `cairn_db` claim names the database deployment).
 */
import { Policy, Rule } from "@cairn/policy";
/** The caller is in a team database: the token's verified selector names `teams`. */
export declare const inTeam: Rule.Rule;
export declare const notesPolicy: Policy.PolicyDefinition;
