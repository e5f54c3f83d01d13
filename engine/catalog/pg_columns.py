"""Column lists of PostgreSQL 15's pg_catalog relations, as `psql \\d` shows them.

Generated from a PostgreSQL 15 server (`pg_attribute` of each relation) so that Swell's
system relations have the same column names, order and types; `engine.catalog.pg_catalog`
turns each spec into fields with `parse_columns`.
"""

from __future__ import annotations

PG_COLUMNS: dict[str, str] = {
    "pg_namespace": ("oid oid, nspname name, nspowner oid, nspacl aclitem[]"),
    "pg_class": (
        "oid oid, relname name, relnamespace oid, reltype oid, reloftype oid, relowner oid, relam "
        "oid, relfilenode oid, reltablespace oid, relpages integer, reltuples real, relallvisible "
        "integer, reltoastrelid oid, relhasindex boolean, relisshared boolean, relpersistence "
        '"char", relkind "char", relnatts smallint, relchecks smallint, relhasrules boolean, '
        "relhastriggers boolean, relhassubclass boolean, relrowsecurity boolean, "
        'relforcerowsecurity boolean, relispopulated boolean, relreplident "char", relispartition '
        "boolean, relrewrite oid, relfrozenxid xid, relminmxid xid, relacl aclitem[], reloptions "
        "text[], relpartbound pg_node_tree"
    ),
    "pg_attribute": (
        "attrelid oid, attname name, atttypid oid, attstattarget integer, attlen smallint, attnum "
        "smallint, attndims integer, attcacheoff integer, atttypmod integer, attbyval boolean, "
        'attalign "char", attstorage "char", attcompression "char", attnotnull boolean, atthasdef '
        'boolean, atthasmissing boolean, attidentity "char", attgenerated "char", attisdropped '
        "boolean, attislocal boolean, attinhcount integer, attcollation oid, attacl aclitem[], "
        "attoptions text[], attfdwoptions text[], attmissingval anyarray"
    ),
    "pg_type": (
        "oid oid, typname name, typnamespace oid, typowner oid, typlen smallint, typbyval "
        'boolean, typtype "char", typcategory "char", typispreferred boolean, typisdefined '
        'boolean, typdelim "char", typrelid oid, typsubscript regproc, typelem oid, typarray oid, '
        "typinput regproc, typoutput regproc, typreceive regproc, typsend regproc, typmodin "
        'regproc, typmodout regproc, typanalyze regproc, typalign "char", typstorage "char", '
        "typnotnull boolean, typbasetype oid, typtypmod integer, typndims integer, typcollation "
        "oid, typdefaultbin pg_node_tree, typdefault text, typacl aclitem[]"
    ),
    "pg_database": (
        'oid oid, datname name, datdba oid, encoding integer, datlocprovider "char", '
        "datistemplate boolean, datallowconn boolean, datconnlimit integer, datfrozenxid xid, "
        "datminmxid xid, dattablespace oid, datcollate text, datctype text, daticulocale text, "
        "datcollversion text, datacl aclitem[]"
    ),
    "pg_roles": (
        "rolname name, rolsuper boolean, rolinherit boolean, rolcreaterole boolean, rolcreatedb "
        "boolean, rolcanlogin boolean, rolreplication boolean, rolconnlimit integer, rolpassword "
        "text, rolvaliduntil timestamp with time zone, rolbypassrls boolean, rolconfig text[], "
        "oid oid"
    ),
    "pg_user": (
        "usename name, usesysid oid, usecreatedb boolean, usesuper boolean, userepl boolean, "
        "usebypassrls boolean, passwd text, valuntil timestamp with time zone, useconfig text[]"
    ),
    "pg_description": ("objoid oid, classoid oid, objsubid integer, description text"),
    "pg_attrdef": ("oid oid, adrelid oid, adnum smallint, adbin pg_node_tree"),
    "pg_index": (
        "indexrelid oid, indrelid oid, indnatts smallint, indnkeyatts smallint, indisunique "
        "boolean, indnullsnotdistinct boolean, indisprimary boolean, indisexclusion boolean, "
        "indimmediate boolean, indisclustered boolean, indisvalid boolean, indcheckxmin boolean, "
        "indisready boolean, indislive boolean, indisreplident boolean, indkey int2vector, "
        "indcollation oidvector, indclass oidvector, indoption int2vector, indexprs pg_node_tree, "
        "indpred pg_node_tree"
    ),
    "pg_constraint": (
        'oid oid, conname name, connamespace oid, contype "char", condeferrable boolean, '
        "condeferred boolean, convalidated boolean, conrelid oid, contypid oid, conindid oid, "
        'conparentid oid, confrelid oid, confupdtype "char", confdeltype "char", confmatchtype '
        '"char", conislocal boolean, coninhcount integer, connoinherit boolean, conkey '
        "smallint[], confkey smallint[], conpfeqop oid[], conppeqop oid[], conffeqop oid[], "
        "confdelsetcols smallint[], conexclop oid[], conbin pg_node_tree"
    ),
    "pg_am": ('oid oid, amname name, amhandler regproc, amtype "char"'),
    "pg_proc": (
        "oid oid, proname name, pronamespace oid, proowner oid, prolang oid, procost real, "
        'prorows real, provariadic oid, prosupport regproc, prokind "char", prosecdef boolean, '
        'proleakproof boolean, proisstrict boolean, proretset boolean, provolatile "char", '
        'proparallel "char", pronargs smallint, pronargdefaults smallint, prorettype oid, '
        'proargtypes oidvector, proallargtypes oid[], proargmodes "char"[], proargnames text[], '
        "proargdefaults pg_node_tree, protrftypes oid[], prosrc text, probin text, prosqlbody "
        "pg_node_tree, proconfig text[], proacl aclitem[]"
    ),
    "pg_settings": (
        "name text, setting text, unit text, category text, short_desc text, extra_desc text, "
        "context text, vartype text, source text, min_val text, max_val text, enumvals text[], "
        "boot_val text, reset_val text, sourcefile text, sourceline integer, pending_restart "
        "boolean"
    ),
    "pg_tables": (
        "schemaname name, tablename name, tableowner name, tablespace name, hasindexes boolean, "
        "hasrules boolean, hastriggers boolean, rowsecurity boolean"
    ),
    "pg_views": ("schemaname name, viewname name, viewowner name, definition text"),
    "pg_matviews": (
        "schemaname name, matviewname name, matviewowner name, tablespace name, hasindexes "
        "boolean, ispopulated boolean, definition text"
    ),
    "pg_indexes": (
        "schemaname name, tablename name, indexname name, tablespace name, indexdef text"
    ),
    "pg_collation": (
        'oid oid, collname name, collnamespace oid, collowner oid, collprovider "char", '
        "collisdeterministic boolean, collencoding integer, collcollate text, collctype text, "
        "colliculocale text, collversion text"
    ),
    "pg_range": (
        "rngtypid oid, rngsubtype oid, rngmultitypid oid, rngcollation oid, rngsubopc oid, "
        "rngcanonical regproc, rngsubdiff regproc"
    ),
    "pg_enum": ("oid oid, enumtypid oid, enumsortorder real, enumlabel name"),
    "pg_extension": (
        "oid oid, extname name, extowner oid, extnamespace oid, extrelocatable boolean, "
        "extversion text, extconfig oid[], extcondition text[]"
    ),
    "pg_depend": (
        "classid oid, objid oid, objsubid integer, refclassid oid, refobjid oid, refobjsubid "
        'integer, deptype "char"'
    ),
    "pg_inherits": ("inhrelid oid, inhparent oid, inhseqno integer, inhdetachpending boolean"),
    "pg_sequence": (
        "seqrelid oid, seqtypid oid, seqstart bigint, seqincrement bigint, seqmax bigint, seqmin "
        "bigint, seqcache bigint, seqcycle boolean"
    ),
    "pg_stat_activity": (
        "datid oid, datname name, pid integer, leader_pid integer, usesysid oid, usename name, "
        "application_name text, client_addr inet, client_hostname text, client_port integer, "
        "backend_start timestamp with time zone, xact_start timestamp with time zone, query_start "
        "timestamp with time zone, state_change timestamp with time zone, wait_event_type text, "
        "wait_event text, state text, backend_xid xid, backend_xmin xid, query_id bigint, query "
        "text, backend_type text"
    ),
    "pg_stat_user_tables": (
        "relid oid, schemaname name, relname name, seq_scan bigint, seq_tup_read bigint, idx_scan "
        "bigint, idx_tup_fetch bigint, n_tup_ins bigint, n_tup_upd bigint, n_tup_del bigint, "
        "n_tup_hot_upd bigint, n_live_tup bigint, n_dead_tup bigint, n_mod_since_analyze bigint, "
        "n_ins_since_vacuum bigint, last_vacuum timestamp with time zone, last_autovacuum "
        "timestamp with time zone, last_analyze timestamp with time zone, last_autoanalyze "
        "timestamp with time zone, vacuum_count bigint, autovacuum_count bigint, analyze_count "
        "bigint, autoanalyze_count bigint"
    ),
    "pg_auth_members": ("roleid oid, member oid, grantor oid, admin_option boolean"),
    "pg_tablespace": ("oid oid, spcname name, spcowner oid, spcacl aclitem[], spcoptions text[]"),
    "pg_shdescription": ("objoid oid, classoid oid, description text"),
    "pg_policy": (
        'oid oid, polname name, polrelid oid, polcmd "char", polpermissive boolean, polroles '
        "oid[], polqual pg_node_tree, polwithcheck pg_node_tree"
    ),
    "pg_statistic_ext": (
        "oid oid, stxrelid oid, stxname name, stxnamespace oid, stxowner oid, stxstattarget "
        'integer, stxkeys int2vector, stxkind "char"[], stxexprs pg_node_tree'
    ),
    "pg_publication": (
        "oid oid, pubname name, pubowner oid, puballtables boolean, pubinsert boolean, pubupdate "
        "boolean, pubdelete boolean, pubtruncate boolean, pubviaroot boolean"
    ),
    "pg_publication_rel": (
        "oid oid, prpubid oid, prrelid oid, prqual pg_node_tree, prattrs int2vector"
    ),
    "pg_publication_namespace": ("oid oid, pnpubid oid, pnnspid oid"),
    "pg_trigger": (
        "oid oid, tgrelid oid, tgparentid oid, tgname name, tgfoid oid, tgtype smallint, "
        'tgenabled "char", tgisinternal boolean, tgconstrrelid oid, tgconstrindid oid, '
        "tgconstraint oid, tgdeferrable boolean, tginitdeferred boolean, tgnargs smallint, tgattr "
        "int2vector, tgargs bytea, tgqual pg_node_tree, tgoldtable name, tgnewtable name"
    ),
    "pg_language": (
        "oid oid, lanname name, lanowner oid, lanispl boolean, lanpltrusted boolean, "
        "lanplcallfoid oid, laninline oid, lanvalidator oid, lanacl aclitem[]"
    ),
    "pg_cast": (
        'oid oid, castsource oid, casttarget oid, castfunc oid, castcontext "char", castmethod '
        '"char"'
    ),
    "pg_operator": (
        'oid oid, oprname name, oprnamespace oid, oprowner oid, oprkind "char", oprcanmerge '
        "boolean, oprcanhash boolean, oprleft oid, oprright oid, oprresult oid, oprcom oid, "
        "oprnegate oid, oprcode regproc, oprrest regproc, oprjoin regproc"
    ),
    "pg_rewrite": (
        'oid oid, rulename name, ev_class oid, ev_type "char", ev_enabled "char", is_instead '
        "boolean, ev_qual pg_node_tree, ev_action pg_node_tree"
    ),
    "pg_partitioned_table": (
        'partrelid oid, partstrat "char", partnatts smallint, partdefid oid, partattrs '
        "int2vector, partclass oidvector, partcollation oidvector, partexprs pg_node_tree"
    ),
    "pg_foreign_table": ("ftrelid oid, ftserver oid, ftoptions text[]"),
    "pg_sequences": (
        "schemaname name, sequencename name, sequenceowner name, data_type regtype, start_value "
        "bigint, min_value bigint, max_value bigint, increment_by bigint, cycle boolean, "
        "cache_size bigint, last_value bigint"
    ),
    "pg_opclass": (
        "oid oid, opcmethod oid, opcname name, opcnamespace oid, opcowner oid, opcfamily oid, "
        "opcintype oid, opcdefault boolean, opckeytype oid"
    ),
    "pg_conversion": (
        "oid oid, conname name, connamespace oid, conowner oid, conforencoding integer, "
        "contoencoding integer, conproc regproc, condefault boolean"
    ),
    "pg_shadow": (
        "usename name, usesysid oid, usecreatedb boolean, usesuper boolean, userepl boolean, "
        "usebypassrls boolean, passwd text, valuntil timestamp with time zone, useconfig text[]"
    ),
    "pg_locks": (
        "locktype text, database oid, relation oid, page integer, tuple smallint, virtualxid "
        "text, transactionid xid, classid oid, objid oid, objsubid smallint, virtualtransaction "
        "text, pid integer, mode text, granted boolean, fastpath boolean, waitstart timestamp "
        "with time zone"
    ),
    "pg_authid": (
        "oid oid, rolname name, rolsuper boolean, rolinherit boolean, rolcreaterole boolean, "
        "rolcreatedb boolean, rolcanlogin boolean, rolreplication boolean, rolbypassrls boolean, "
        "rolconnlimit integer, rolpassword text, rolvaliduntil timestamp with time zone"
    ),
    "pg_event_trigger": (
        'oid oid, evtname name, evtevent name, evtowner oid, evtfoid oid, evtenabled "char", '
        "evttags text[]"
    ),
    "pg_foreign_data_wrapper": (
        "oid oid, fdwname name, fdwowner oid, fdwhandler oid, fdwvalidator oid, fdwacl aclitem[], "
        "fdwoptions text[]"
    ),
    "pg_foreign_server": (
        "oid oid, srvname name, srvowner oid, srvfdw oid, srvtype text, srvversion text, srvacl "
        "aclitem[], srvoptions text[]"
    ),
    "pg_user_mapping": ("oid oid, umuser oid, umserver oid, umoptions text[]"),
    "pg_default_acl": (
        'oid oid, defaclrole oid, defaclnamespace oid, defaclobjtype "char", defaclacl aclitem[]'
    ),
    "pg_init_privs": (
        'objoid oid, classoid oid, objsubid integer, privtype "char", initprivs aclitem[]'
    ),
    "pg_seclabel": ("objoid oid, classoid oid, objsubid integer, provider text, label text"),
    "pg_shseclabel": ("objoid oid, classoid oid, provider text, label text"),
    "pg_subscription": (
        "oid oid, subdbid oid, subskiplsn pg_lsn, subname name, subowner oid, subenabled boolean, "
        'subbinary boolean, substream boolean, subtwophasestate "char", subdisableonerr boolean, '
        "subconninfo text, subslotname name, subsynccommit text, subpublications text[]"
    ),
    "pg_statistic_ext_data": (
        "stxoid oid, stxdinherit boolean, stxdndistinct pg_ndistinct, stxddependencies "
        "pg_dependencies, stxdmcv pg_mcv_list, stxdexpr pg_statistic[]"
    ),
    "pg_transform": ("oid oid, trftype oid, trflang oid, trffromsql regproc, trftosql regproc"),
    "pg_ts_config": ("oid oid, cfgname name, cfgnamespace oid, cfgowner oid, cfgparser oid"),
    "pg_ts_dict": (
        "oid oid, dictname name, dictnamespace oid, dictowner oid, dicttemplate oid, "
        "dictinitoption text"
    ),
    "pg_ts_parser": (
        "oid oid, prsname name, prsnamespace oid, prsstart regproc, prstoken regproc, prsend "
        "regproc, prsheadline regproc, prslextype regproc"
    ),
    "pg_ts_template": (
        "oid oid, tmplname name, tmplnamespace oid, tmplinit regproc, tmpllexize regproc"
    ),
    "pg_aggregate": (
        'aggfnoid regproc, aggkind "char", aggnumdirectargs smallint, aggtransfn regproc, '
        "aggfinalfn regproc, aggcombinefn regproc, aggserialfn regproc, aggdeserialfn regproc, "
        "aggmtransfn regproc, aggminvtransfn regproc, aggmfinalfn regproc, aggfinalextra boolean, "
        'aggmfinalextra boolean, aggfinalmodify "char", aggmfinalmodify "char", aggsortop oid, '
        "aggtranstype oid, aggtransspace integer, aggmtranstype oid, aggmtransspace integer, "
        "agginitval text, aggminitval text"
    ),
    "pg_amop": (
        "oid oid, amopfamily oid, amoplefttype oid, amoprighttype oid, amopstrategy smallint, "
        'amoppurpose "char", amopopr oid, amopmethod oid, amopsortfamily oid'
    ),
    "pg_amproc": (
        "oid oid, amprocfamily oid, amproclefttype oid, amprocrighttype oid, amprocnum smallint, "
        "amproc regproc"
    ),
    "pg_opfamily": ("oid oid, opfmethod oid, opfname name, opfnamespace oid, opfowner oid"),
    "pg_largeobject_metadata": ("oid oid, lomowner oid, lomacl aclitem[]"),
}
