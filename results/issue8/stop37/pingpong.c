#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
int main(int argc,char**argv){int uds=argc>1&&!strcmp(argv[1],"uds");int sv[2];
 if(uds){socketpair(AF_UNIX,SOCK_STREAM,0,sv);}else{
  int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);bind(l,(void*)&a,sizeof a);listen(l,1);socklen_t al=sizeof a;getsockname(l,(void*)&a,&al);
  sv[0]=socket(AF_INET,SOCK_STREAM,0);connect(sv[0],(void*)&a,sizeof a);sv[1]=accept(l,0,0);int one=1;setsockopt(sv[0],IPPROTO_TCP,TCP_NODELAY,&one,4);setsockopt(sv[1],IPPROTO_TCP,TCP_NODELAY,&one,4);}
 char b[64];int n=20000;
 if(fork()==0){for(int i=0;i<n;i++){read(sv[1],b,64);write(sv[1],b,64);}exit(0);}
 double*t=malloc(n*sizeof(double));
 for(int i=0;i<n;i++){double s=now();write(sv[0],b,64);read(sv[0],b,64);t[i]=now()-s;}
 int c(const void*x,const void*y){double d=*(double*)x-*(double*)y;return d<0?-1:d>0;}
 qsort(t,n,sizeof(double),c);printf("%s rtt p50 %.1f p90 %.1f p99 %.1f us\n",uds?"uds":"tcp",t[n/2],t[n*9/10],t[n*99/100]);}
