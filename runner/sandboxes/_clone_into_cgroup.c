/* Starting a program directly inside a cgroup: clone3(CLONE_INTO_CGROUP), Linux 5.7+.
 *
 * Why: a process that moves itself into a cgroup (a write to cgroup.procs) takes the kernel's
 * threadgroup lock for writing, which waits for an RCU grace period unless the cgroup2 mount
 * has favordynmods: about a millisecond on an idle machine, 5 to 30 ms on a busy one, paid by
 * every run. A child created in its cgroup takes that lock only for reading. It also spares
 * the /bin/sh that did the move before exec'ing the program.
 *
 * How: like vfork (CLONE_VM | CLONE_VFORK), the child shares this process's memory and the
 * calling thread waits until the child has exec'd or exited. The child runs on a stack of its
 * own (a vfork child on the caller's stack would overwrite the frames the caller returns
 * through), so the clone3 call is a few lines of x86-64 assembly; elsewhere the module says it
 * is not available and Proctor keeps the shell wrapper.
 *
 * The child does only system calls on data prepared before the clone: it resets caught
 * signals (they would run the parent's handlers in the child), starts a session, puts the
 * three pipes on 0-2, closes every other descriptor, changes directory and exec's the first
 * candidate path that works, as subprocess does. A failure is left in memory the parent shares
 * (the stage and errno) and the parent raises it as OSError.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__linux__) && defined(__x86_64__)
#define CLONE_INTO_CGROUP_BUILT 1
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define CHILD_STACK_BYTES (256 * 1024)

enum stage { STAGE_NONE = 0, STAGE_SIGNALS, STAGE_SESSION, STAGE_FDS, STAGE_CHDIR, STAGE_EXEC };

struct child_plan {
    char *const *executables; /* candidate paths, NULL-terminated */
    char *const *argv;
    char *const *envp;        /* NULL: this process's environment */
    const char *cwd;          /* NULL: this process's directory */
    int fds[3];               /* what becomes 0, 1 and 2 */
    int new_session;
    sigset_t mask;            /* the caller's signal mask, restored just before exec */
    /* Written by the child, read by the parent once the child exec'd or exited. */
    volatile int failed_stage;
    volatile int failed_errno;
};

extern char **environ;

static int child_fail(struct child_plan *plan, int stage)
{
    plan->failed_stage = stage;
    plan->failed_errno = errno;
    return 127;
}

static int child_main(void *arg)
{
    struct child_plan *plan = arg;
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction current;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &current) != 0)
            continue;
        /* Caught signals would run the parent's handlers here; SIGPIPE and SIGXFSZ, which
         * Python ignores, go back to their defaults as subprocess's restore_signals does. */
        if (current.sa_handler != SIG_DFL &&
            (current.sa_handler != SIG_IGN || sig == SIGPIPE || sig == SIGXFSZ))
            sigaction(sig, &default_action, NULL);
    }
    if (plan->new_session && setsid() < 0)
        return child_fail(plan, STAGE_SESSION);
    /* Lift the three descriptors above 2 first, so putting one on 0-2 never closes another. */
    int lifted[3];
    for (int i = 0; i < 3; i++) {
        lifted[i] = fcntl(plan->fds[i], F_DUPFD, 3);
        if (lifted[i] < 0)
            return child_fail(plan, STAGE_FDS);
    }
    for (int i = 0; i < 3; i++) {
        if (dup2(lifted[i], i) < 0)
            return child_fail(plan, STAGE_FDS);
    }
    if (syscall(__NR_close_range, 3U, ~0U, 0U) != 0)
        return child_fail(plan, STAGE_FDS);
    if (plan->cwd != NULL && chdir(plan->cwd) != 0)
        return child_fail(plan, STAGE_CHDIR);
    if (sigprocmask(SIG_SETMASK, &plan->mask, NULL) != 0)
        return child_fail(plan, STAGE_SIGNALS);
    char *const *envp = plan->envp != NULL ? plan->envp : environ;
    /* As execvpe: the first error that is not "no such file" is the one reported. */
    int reported = 0;
    for (char *const *path = plan->executables; *path != NULL; path++) {
        execve(*path, plan->argv, envp);
        if (errno != ENOENT && errno != ENOTDIR && reported == 0)
            reported = errno;
    }
    if (reported != 0)
        errno = reported;
    return child_fail(plan, STAGE_EXEC);
}

/* clone3 with the child on its own stack, running fn(arg) and exiting with its result. The
 * kernel gives the child the stack's top as its stack pointer; everything else the child needs
 * is in registers the system call leaves alone (r12, r13). */
static long clone3_running(struct clone_args *args, int (*fn)(void *), void *arg)
{
    long result;
    register void *fn_reg __asm__("r12") = (void *)fn;
    register void *arg_reg __asm__("r13") = arg;
    __asm__ volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "mov %%eax, %%edi\n\t"
        "mov $60, %%eax\n\t" /* exit */
        "syscall\n\t"
        "hlt\n\t"
        "1:\n\t"
        : "=a"(result)
        : "0"((long)__NR_clone3), "D"(args), "S"(sizeof *args), "r"(fn_reg), "r"(arg_reg)
        : "rcx", "r11", "memory");
    return result;
}

/* Whether ``bytes`` holds a NUL, which a C string would silently cut short: ValueError, as
 * subprocess raises. */
static int embeds_nul(PyObject *bytes)
{
    if (strlen(PyBytes_AS_STRING(bytes)) == (size_t)PyBytes_GET_SIZE(bytes))
        return 0;
    PyErr_SetString(PyExc_ValueError, "embedded null byte");
    return 1;
}

/* A NULL-terminated array of the bytes objects in ``seq`` (borrowed pointers: ``seq``'s items
 * live as long as the fast sequence does). */
static char **byte_strings(PyObject *fast)
{
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    char **array = PyMem_Calloc((size_t)count + 1, sizeof(char *));
    if (array == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "expected bytes");
            PyMem_Free(array);
            return NULL;
        }
        if (embeds_nul(item)) {
            PyMem_Free(array);
            return NULL;
        }
        array[i] = PyBytes_AS_STRING(item);
    }
    return array;
}

/* OSError for the child's failure, naming the folder (chdir) or the program (exec) as
 * subprocess does. */
static void raise_child_error(struct child_plan *plan, PyObject *cwd, PyObject *program)
{
    PyObject *named = plan->failed_stage == STAGE_CHDIR  ? cwd
                      : plan->failed_stage == STAGE_EXEC ? program
                                                         : NULL;
    PyObject *filename = named != NULL ? PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(named)) : NULL;
    errno = plan->failed_errno;
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, filename);
    Py_XDECREF(filename);
}

static PyObject *spawn(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *executables_obj, *argv_obj, *env_obj, *cwd_obj;
    int cgroup_fd, stdin_fd, stdout_fd, stderr_fd, new_session;
    if (!PyArg_ParseTuple(args, "OOOOiiiip:spawn", &executables_obj, &argv_obj, &env_obj,
                          &cwd_obj, &cgroup_fd, &stdin_fd, &stdout_fd, &stderr_fd,
                          &new_session))
        return NULL;

    PyObject *result = NULL;
    PyObject *executables_fast = NULL, *argv_fast = NULL, *env_fast = NULL;
    char **executables = NULL, **argv = NULL, **envp = NULL;
    void *stack = NULL;
    struct child_plan *plan = NULL;

    executables_fast = PySequence_Fast(executables_obj, "executables must be a sequence");
    argv_fast = executables_fast ? PySequence_Fast(argv_obj, "argv must be a sequence") : NULL;
    if (argv_fast == NULL)
        goto done;
    if (PySequence_Fast_GET_SIZE(executables_fast) == 0 || PySequence_Fast_GET_SIZE(argv_fast) == 0) {
        PyErr_SetString(PyExc_ValueError, "executables and argv must not be empty");
        goto done;
    }
    if (env_obj != Py_None) {
        env_fast = PySequence_Fast(env_obj, "env must be a sequence");
        if (env_fast == NULL || (envp = byte_strings(env_fast)) == NULL)
            goto done;
    }
    if (cwd_obj != Py_None && !PyBytes_Check(cwd_obj)) {
        PyErr_SetString(PyExc_TypeError, "cwd must be bytes or None");
        goto done;
    }
    if (cwd_obj != Py_None && embeds_nul(cwd_obj))
        goto done;
    if ((executables = byte_strings(executables_fast)) == NULL || (argv = byte_strings(argv_fast)) == NULL)
        goto done;
    plan = PyMem_Calloc(1, sizeof *plan);
    stack = PyMem_Malloc(CHILD_STACK_BYTES);
    if (plan == NULL || stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    plan->executables = executables;
    plan->argv = argv;
    plan->envp = envp;
    plan->cwd = cwd_obj == Py_None ? NULL : PyBytes_AS_STRING(cwd_obj);
    plan->fds[0] = stdin_fd;
    plan->fds[1] = stdout_fd;
    plan->fds[2] = stderr_fd;
    plan->new_session = new_session;

    struct clone_args clone;
    memset(&clone, 0, sizeof clone);
    clone.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
    clone.exit_signal = SIGCHLD;
    /* The stack grows down from its top, which must be 16-byte aligned for the call. */
    clone.stack = (uint64_t)(uintptr_t)stack;
    clone.stack_size = CHILD_STACK_BYTES;
    clone.cgroup = (uint64_t)cgroup_fd;

    long pid;
    int clone_errno = 0;
    Py_BEGIN_ALLOW_THREADS
    sigset_t all;
    sigfillset(&all);
    /* No signal handler of this process may run in the child before it resets them. */
    pthread_sigmask(SIG_SETMASK, &all, &plan->mask);
    pid = clone3_running(&clone, child_main, plan);
    if (pid < 0)
        clone_errno = (int)-pid;
    pthread_sigmask(SIG_SETMASK, &plan->mask, NULL);
    if (pid > 0 && plan->failed_stage != STAGE_NONE) {
        int status;
        while (waitpid((pid_t)pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    Py_END_ALLOW_THREADS

    if (pid < 0) {
        errno = clone_errno;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (plan->failed_stage != STAGE_NONE) {
        raise_child_error(plan, cwd_obj, PySequence_Fast_GET_ITEM(argv_fast, 0));
    } else {
        result = PyLong_FromLong(pid);
    }

done:
    PyMem_Free(stack);
    PyMem_Free(plan);
    PyMem_Free(executables);
    PyMem_Free(argv);
    PyMem_Free(envp);
    Py_XDECREF(executables_fast);
    Py_XDECREF(argv_fast);
    Py_XDECREF(env_fast);
    return result;
}
#endif

static PyMethodDef methods[] = {
#ifdef CLONE_INTO_CGROUP_BUILT
    {"spawn", spawn, METH_VARARGS,
     "spawn(executables, argv, env, cwd, cgroup_fd, stdin_fd, stdout_fd, stderr_fd, "
     "new_session) -> pid: start the first executable that runs, in the cgroup open as "
     "cgroup_fd. Raises OSError as exec or chdir would."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_clone_into_cgroup",
    "Starting a program directly inside a cgroup (clone3 with CLONE_INTO_CGROUP).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__clone_into_cgroup(void)
{
    PyObject *created = PyModule_Create(&module);
#ifdef CLONE_INTO_CGROUP_BUILT
    if (created != NULL && PyModule_AddIntConstant(created, "BUILT", 1) < 0) {
        Py_DECREF(created);
        return NULL;
    }
#else
    if (created != NULL && PyModule_AddIntConstant(created, "BUILT", 0) < 0) {
        Py_DECREF(created);
        return NULL;
    }
#endif
    return created;
}
