/* A minimal NVTX tool for tests: loaded through NVTX_INJECTION64_PATH, it
 * logs every domain created and every range pushed or popped to the file
 * named by FASTMOG_NVTX_LOG, one line each:
 *   domain <name> | push <domain> <message> | pop <domain>
 * Build: gcc -shared -fPIC -I$CUDA_HOME/include nvtx_injection.c */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>  /* with NVTX_NO_IMPL: the types a tool needs */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *log_file;

static const char *domain_name(nvtxDomainHandle_t domain)
{
    return domain != NULL ? (const char *)domain : "(default)";
}

/* The handle is the domain's name, copied; it lives as long as the process. */
static nvtxDomainHandle_t create_domain(const char *name)
{
    char *copy = strdup(name);
    fprintf(log_file, "domain\t%s\n", name);
    fflush(log_file);
    return (nvtxDomainHandle_t)copy;
}

static int push_range(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
    const char *message = "";
    if (attr != NULL && attr->messageType == NVTX_MESSAGE_TYPE_ASCII)
        message = attr->message.ascii;
    fprintf(log_file, "push\t%s\t%s\n", domain_name(domain), message);
    fflush(log_file);
    return 0;
}

static int pop_range(nvtxDomainHandle_t domain)
{
    fprintf(log_file, "pop\t%s\n", domain_name(domain));
    fflush(log_file);
    return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    const char *path = getenv("FASTMOG_NVTX_LOG");
    if (callbacks == NULL || path == NULL
        || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)
        || size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    log_file = fopen(path, "w");
    if (log_file == NULL)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)create_domain;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push_range;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop_range;
    return 1;
}
