/*
 * inferplanectl — the operator's command-line tool. One file per subcommand; each exports
 * `int ctl_<name>(int argc, char **argv)` (argv[0] is the subcommand name) returning the exit
 * code: 0 success, 1 failure of the operation, 2 usage error.
 */
#ifndef CTL_H
#define CTL_H

int ctl_route(int argc, char **argv);     /* ask a decider where a request would go */
int ctl_poke(int argc, char **argv);      /* send malformed frames to a ZeroMQ endpoint */
int ctl_proto_doc(int argc, char **argv); /* print the message catalogue as Markdown */
int ctl_tokenize(int argc, char **argv);  /* encode/decode with a tokenizer.json */
int ctl_validate(int argc, char **argv);  /* compile a policy directory, print its errors */

#endif
